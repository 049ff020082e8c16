from __future__ import annotations

from django.db.models import Count, Q

from tasks.models import Task

from .models import Team


def team_get(*, name: str) -> Team | None:
    return Team.objects.filter(name=name).select_related("parent").first()


def team_children(*, team: Team) -> list[Team]:
    return list(
        Team.objects.filter(parent=team)
        .prefetch_related("scope_keywords")
        .annotate(pending=Count("tasks", filter=Q(tasks__status=Task.Status.PENDING)))
        .order_by("name")
    )


def team_summary(team: Team) -> dict:
    return {
        "name": team.name,
        "description": team.description,
        "status": team.status,
        "bootstrapped": team.bootstrapped,
        "keywords": [k.keyword for k in team.scope_keywords.all()],
        "pending_tasks": getattr(team, "pending", None),
    }


def team_tree(*, root: Team, recursive: bool, max_depth: int = 10) -> list[dict]:
    """The children of `root` (and theirs, when recursive), guarded against cycles."""

    def walk(node: Team, depth: int, seen: set[int]) -> list[dict]:
        out = []
        for child in team_children(team=node):
            if child.pk in seen:
                continue
            entry = team_summary(child)
            if recursive:
                # Past the depth guard the children are marked truncated, not silently absent.
                if depth < max_depth:
                    entry["children"] = walk(child, depth + 1, seen | {child.pk})
                else:
                    entry["children_truncated"] = True
            out.append(entry)
        return out

    return walk(root, 1, {root.pk})


PENDING_SHOWN = 20


def team_status(team: Team) -> dict:
    """Live queue state of one team (get_status): running daily-ops against the cap, whether
    an org-op holds the mutex, pending work only (finished history is not queue depth)."""
    from django.utils import timezone

    from tasks.admission import team_cap
    from tasks.models import OrgOpLock

    cap = team_cap(team.name)
    running = list(
        Task.objects.filter(team=team, status=Task.Status.RUNNING).order_by("started_at", "id")
    )
    pending = Task.objects.filter(team=team, status=Task.Status.PENDING).order_by(
        "priority", "created_at", "id"
    )
    current = running[0] if running else None
    if current is None:
        current_task = None
    elif current.type == Task.Type.BOOTSTRAP:
        current_task = "(initializing)"
    else:
        current_task = current.text[:200]
    return {
        "team": team.name,
        "status": team.status,
        "active_daily_ops": len(running),
        "max_concurrent_daily_ops": cap,
        "saturation": len(running) >= cap,
        "org_op_pending": OrgOpLock.objects.filter(
            team=team, expires_at__gt=timezone.now()
        ).exists(),
        "queue_depth": pending.count(),
        "current_task": current_task,
        "pending_tasks": [
            {
                "task_id": t.pk,
                "type": t.type,
                "priority": t.priority_name,
                "text": t.text[:200],
                "created_at": t.created_at.isoformat(),
            }
            for t in pending[:PENDING_SHOWN]
        ],
    }

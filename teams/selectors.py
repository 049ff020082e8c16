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

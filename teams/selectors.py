"""Reads of the org tree."""

from __future__ import annotations

import re

from django.db import connection
from django.db.models import Count, Q, QuerySet

from openhive.core.errors import NotFound
from openhive.core.reads import Read, run_reads

from .models import TEAM_NAME_PATTERN, Team

_NAME_RE = re.compile(TEAM_NAME_PATTERN)
# Counted through the reverse relation by its stored value: the tree shows queue depth
# without this app depending on the queue.
PENDING = Count("tasks", filter=Q(tasks__status="pending"))


def team_count() -> int:
    return Team.objects.count()


def team_ancestors(team: Team) -> list[Team]:
    """Root first, parent last. One query however deep the team sits (following `parent` took
    one per level, at every session start); a corrupted tree's cycle ends the chain."""
    if team.parent_id is None:
        return []
    return run_reads([team_ancestors_read(team)])[0]


def team_ancestors_read(team: Team) -> Read:
    """`team_ancestors(team)` as a read (of a team with a parent) that a session's start sends
    with its other statements."""
    quote, meta = connection.ops.quote_name, Team._meta
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    parent = quote(meta.get_field("parent").column)
    # UNION (not UNION ALL) drops a pair met again, so a cycle stops the recursion.
    sql = (
        f"WITH RECURSIVE up (id, parent_id) AS (SELECT {pk}, {parent} FROM {table} "
        f"WHERE {pk} = %s UNION SELECT t.{pk}, t.{parent} FROM {table} t "
        f"JOIN up ON t.{pk} = up.parent_id) "
        f"SELECT t.* FROM {table} t WHERE t.{pk} IN (SELECT id FROM up)"
    )
    return Read.of(Team, sql, [team.parent_id], then=lambda nodes: _chain(team, nodes))


def _chain(team: Team, nodes: list[Team]) -> list[Team]:
    by_pk = {node.pk: node for node in nodes}
    chain: list[Team] = []
    seen = {team.pk}
    node = by_pk.get(team.parent_id)
    while node is not None and node.pk not in seen:
        chain.append(node)
        seen.add(node.pk)
        node = by_pk.get(node.parent_id)
    return list(reversed(chain))


def team_get(*, name: str) -> Team | None:
    return Team.objects.filter(name=name).select_related("parent").first()


def teams_annotated() -> QuerySet[Team]:
    """Teams with parent, scope keywords and the number of pending tasks (`pending`)."""
    return (
        Team.objects.select_related("parent")
        .prefetch_related("scope_keywords")
        .annotate(pending=PENDING)
        .order_by("name")
    )


def team_get_or_404(*, name: str) -> Team:
    """The team, or NotFound. A name that is not a valid slug cannot exist, so it never reaches
    the database (no odd bytes in a query, no surprise from a backend)."""
    team = teams_annotated().filter(name=name).first() if _NAME_RE.fullmatch(name) else None
    if team is None:
        raise NotFound(f'team "{name}" not found')
    return team


def team_named(name: str) -> Team:
    """The team alone (no annotations, nothing prefetched), or NotFound: what a guard needs
    before a tool acts on a team. A query fan-out makes one such lookup per child."""
    team = Team.objects.filter(name=name).first() if _NAME_RE.fullmatch(name) else None
    if team is None:
        raise NotFound(f'team "{name}" not found')
    return team


def team_children(*, team: Team) -> list[Team]:
    return list(
        Team.objects.filter(parent=team)
        .prefetch_related("scope_keywords")
        .annotate(pending=PENDING)
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


def teammessages_shown_at(*, team: Team, started_at, within_seconds: float = 10.0) -> list:
    """The inbox messages a session of `team` that started at `started_at` was shown (they are
    taken at the session's start): what a replay of that session shows again."""
    from datetime import timedelta

    from .models import TeamMessage

    return list(
        TeamMessage.objects.filter(
            recipient=team,
            delivered_at__gte=started_at,
            delivered_at__lte=started_at + timedelta(seconds=within_seconds),
        )
        .select_related("sender")
        .order_by("id")
    )


def team_budgets(*, name: str) -> dict:
    """The `budgets:` of a team's config.yaml (empty when it has none or cannot be read)."""
    from .config import load_team_config

    try:
        return load_team_config(name).budgets.model_dump(exclude_none=True)
    except Exception:  # a broken config shows as no budget here; the session says why
        return {}


def subagent_depth_of(*, session_id: int | None) -> int:
    """How deep in subagents a session runs: 0 for a team's own session, else the depth its
    spec options recorded (1 for the subagent an orchestrator or a trigger started)."""
    from openhive.engine.models import Session

    if session_id is None:
        return 0
    row = Session.objects.filter(pk=session_id).values("kind", "spec_options").first()
    if row is None or row["kind"] != Session.Kind.SUBAGENT:
        return 0
    depth = (row["spec_options"] or {}).get("depth")
    return depth if isinstance(depth, int) and depth > 0 else 1


def task_is_running(*, task_id: int) -> bool:
    """Whether a task is still running: a subagent's session stops with the task it serves.
    Read through the session's link to the queue, so this app does not import it."""
    from openhive.engine.models import Session

    tasks = Session._meta.get_field("task").related_model
    return tasks.objects.filter(pk=task_id, status="running").exists()

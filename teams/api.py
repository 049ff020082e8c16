"""REST: the org tree (/api/v1/teams)."""

from __future__ import annotations

import re
from datetime import datetime

from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from ninja import Router, Schema

from openhive.errors import NotFound
from tasks.models import Task

from .models import MAIN_TEAM, TEAM_NAME_PATTERN, Team
from .selectors import team_summary, team_tree

router = Router(tags=["teams"])

_NAME_RE = re.compile(TEAM_NAME_PATTERN)


class TeamOut(Schema):
    name: str
    parent: str | None
    description: str
    status: str
    bootstrapped: bool
    keywords: list[str]
    pending_tasks: int
    created_at: datetime


class TeamDetailOut(TeamOut):
    children: list[str]
    tasks_by_status: dict[str, int]


class TeamNode(Schema):
    name: str
    description: str
    status: str
    bootstrapped: bool
    keywords: list[str]
    pending_tasks: int | None
    children: list[TeamNode] = []


TeamNode.model_rebuild()


def _teams() -> QuerySet[Team]:
    return (
        Team.objects.select_related("parent")
        .prefetch_related("scope_keywords")
        .annotate(pending=Count("tasks", filter=Q(tasks__status=Task.Status.PENDING)))
        .order_by("name")
    )


def team_by_name(name: str) -> Team:
    """The team, or NotFound. A name that is not a valid slug cannot exist, so it never reaches
    the database (no odd bytes in a query, no surprise from a backend)."""
    team = _teams().filter(name=name).first() if _NAME_RE.fullmatch(name) else None
    if team is None:
        raise NotFound(f'team "{name}" not found')
    return team


def _team_out(team: Team) -> dict:
    return {
        **team_summary(team),
        "parent": team.parent.name if team.parent else None,
        "pending_tasks": team.pending,
        "created_at": team.created_at,
    }


@router.get("", response=list[TeamOut], summary="All teams, flat")
def teams_list(request: HttpRequest) -> list[dict]:
    return [_team_out(team) for team in _teams()]


@router.get("/tree", response=TeamNode, summary="The org tree from main")
def teams_tree(request: HttpRequest) -> dict:
    main = team_by_name(MAIN_TEAM)
    return {**_team_out(main), "children": team_tree(root=main, recursive=True)}


@router.get("/{name}", response=TeamDetailOut, summary="One team")
def teams_detail(request: HttpRequest, name: str) -> dict:
    team = team_by_name(name)
    counts = dict(
        Task.objects.filter(team=team)
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    return {
        **_team_out(team),
        "children": list(team.children.order_by("name").values_list("name", flat=True)),
        "tasks_by_status": {status: counts.get(status, 0) for status in Task.Status.values},
    }

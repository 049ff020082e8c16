"""REST: the org tree (/api/v1/teams): read it, spawn, shut down, change scope."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Field, Router, Schema, Status

from openhive.core.api import request_actor
from openhive.core.errors import DomainError
from tasks.selectors import task_counts_by_status, team_status
from teams.models import MAIN_TEAM, Team
from teams.selectors import team_get_or_404, team_summary, team_tree, teams_annotated
from teams.services import team_update_scope
from teams.skills import skills_summary

from .services import team_shutdown, team_spawn

router = Router(tags=["teams"])


class TeamOut(Schema):
    name: str
    parent: str | None
    description: str
    status: str
    bootstrapped: bool
    keywords: list[str]
    pending_tasks: int
    created_at: datetime


class SkillOut(Schema):
    name: str
    description: str
    path: str
    required_tools: list[str]
    warnings: list[str]


class SkillProblemOut(Schema):
    path: str
    error: str


class TeamDetailOut(TeamOut):
    children: list[str]
    tasks_by_status: dict[str, int]
    # The team's skills (index lines, never bodies) and the ones that do not load, and why.
    skills: list[SkillOut]
    skill_problems: list[SkillProblemOut]


class TeamNode(Schema):
    name: str
    description: str
    status: str
    bootstrapped: bool
    keywords: list[str]
    pending_tasks: int | None
    children: list[TeamNode] = []


TeamNode.model_rebuild()


def _team_out(team: Team) -> dict:
    return {
        **team_summary(team),
        "parent": team.parent.name if team.parent else None,
        "pending_tasks": team.pending,
        "created_at": team.created_at,
    }


@router.get("", response=list[TeamOut], summary="All teams, flat")
def teams_list(request: HttpRequest) -> list[dict]:
    return [_team_out(team) for team in teams_annotated()]


@router.get("/tree", response=TeamNode, summary="The org tree from main")
def teams_tree(request: HttpRequest) -> dict:
    main = team_get_or_404(name=MAIN_TEAM)
    return {**_team_out(main), "children": team_tree(root=main, recursive=True)}


@router.get("/{name}", response=TeamDetailOut, summary="One team")
def teams_detail(request: HttpRequest, name: str) -> dict:
    team = team_get_or_404(name=name)
    return {
        **_team_out(team),
        "children": list(team.children.order_by("name").values_list("name", flat=True)),
        "tasks_by_status": task_counts_by_status(team=team),
        **_skills(team),
    }


def _skills(team: Team) -> dict:
    summary = skills_summary(team.name)
    return {"skills": summary["skills"], "skill_problems": summary["problems"]}


# --- writes: spawn, shutdown, scope --------------------------------------------------------------
# Operator doors onto the same services as the org tools. They do not wait on the org-op mutex
# (that serializes the agents' own structural changes against their running sessions); an
# operator's shutdown cancels the team's running sessions itself.


class SpawnIn(Schema):
    name: str = Field(..., min_length=1, max_length=64)
    parent: str = Field(MAIN_TEAM, min_length=1, max_length=64)
    description: str = Field("", max_length=2000)
    scope_accepts: list[str] = Field(..., min_length=1, max_length=100)
    init_context: str = Field("", max_length=100_000)
    credentials: dict[str, str] = Field(default_factory=dict)


class SpawnOut(Schema):
    status: str
    team: TeamOut
    bootstrap_task_id: int


class ShutdownOut(Schema):
    removed: list[str]


class ScopeIn(Schema):
    add: list[str] = Field(default_factory=list, max_length=100)
    remove: list[str] = Field(default_factory=list, max_length=100)


class ScopeOut(Schema):
    team: str
    scope: list[str]


class StatusOut(Schema):
    team: str
    status: str
    active_daily_ops: int
    max_concurrent_daily_ops: int
    saturation: bool
    org_op_pending: bool
    queue_depth: int
    current_task: str | None
    pending_tasks: list[dict]


@router.post("", response={201: SpawnOut}, summary="Spawn a team (bootstrap task queued)")
def teams_spawn(request: HttpRequest, payload: SpawnIn) -> Status:
    if not any(k.strip() for k in payload.scope_accepts):
        raise DomainError("scope_accepts needs at least one keyword", code="invalid_input")
    user = request_actor(request)
    spawned = team_spawn(
        parent=team_get_or_404(name=payload.parent),
        name=payload.name,
        description=payload.description,
        scope_accepts=payload.scope_accepts,
        init_context=payload.init_context,
        credentials=payload.credentials,
        created_by=f"api:{user}",
    )
    return Status(
        201,
        {
            "status": "queued",
            "team": _team_out(team_get_or_404(name=spawned.team.name)),
            "bootstrap_task_id": spawned.bootstrap_task.pk,
        },
    )


@router.delete("/{name}", response=ShutdownOut, summary="Shut a team down (cascade optional)")
def teams_shutdown(request: HttpRequest, name: str, cascade: bool = False) -> dict:
    return {"removed": team_shutdown(team=team_get_or_404(name=name), cascade=cascade)}


@router.patch("/{name}/scope", response=ScopeOut, summary="Add or remove scope keywords")
def teams_scope(request: HttpRequest, name: str, payload: ScopeIn) -> dict:
    team = team_get_or_404(name=name)
    return {
        "team": team.name,
        "scope": team_update_scope(team=team, add=payload.add, remove=payload.remove),
    }


@router.get("/{name}/status", response=StatusOut, summary="Live queue state of one team")
def teams_status(request: HttpRequest, name: str) -> dict:
    return team_status(team_get_or_404(name=name))

"""REST: learning and reflection (/api/v1/learning). The operator's door onto a team's cycles:
its cycle triggers and whether each is ready, recent runs, journals, learnings and changes,
and the decisions on changes (confirm, reject, revert)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema

from openhive.core.api import request_actor
from teams.selectors import team_get_or_404

from .selectors import change_dict, team_learning_overview
from .services.changes import change_confirm, change_reject, change_revert

router = Router(tags=["learning"])


class LearningOut(Schema):
    team: str
    triggers: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    journals: dict[str, Any]
    learnings: list[dict[str, Any]]
    changes: list[dict[str, Any]]


class ChangeOut(Schema):
    id: int
    kind: str
    subagent: str
    cycle_run: int | None
    target_type: str
    target: str
    identity: bool
    status: str
    reason: str
    evidence: dict[str, Any]
    created_at: str
    decided_by: str
    reverted_at: str | None


@router.get("/{team}", response=LearningOut, summary="A team's learning and reflection")
def learning_overview(request: HttpRequest, team: str) -> dict:
    return team_learning_overview(team_get_or_404(name=team))


@router.post("/changes/{change_id}/confirm", response=ChangeOut, summary="Apply a proposal")
def change_confirm_api(request: HttpRequest, change_id: int) -> dict:
    return change_dict(change_confirm(change_id=change_id, by=request_actor(request)))


@router.post("/changes/{change_id}/reject", response=ChangeOut, summary="Refuse a proposal")
def change_reject_api(request: HttpRequest, change_id: int) -> dict:
    return change_dict(change_reject(change_id=change_id, by=request_actor(request)))


@router.post("/changes/{change_id}/revert", response=ChangeOut, summary="Undo a change")
def change_revert_api(request: HttpRequest, change_id: int) -> dict:
    return change_dict(change_revert(change_id=change_id, by=request_actor(request)))

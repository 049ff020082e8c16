"""REST: triggers (/api/v1/triggers). The operator's door: no parent check, the same services
and validation as the tools and the admin."""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from openhive.core.errors import NotFound
from openhive.core.scrubbing import scrub
from teams.selectors import team_get_or_404

from .models import TriggerConfig
from .schemas import TriggerFields
from .selectors import trigger_get, trigger_list, trigger_summary
from .services import trigger_create, trigger_disable, trigger_enable, trigger_test, trigger_update

router = Router(tags=["triggers"])


class TriggerOut(Schema):
    name: str
    team: str
    type: str
    state: str
    config: dict[str, Any]
    task: str
    subagent: str | None
    skill: str | None
    max_turns: int | None
    timezone: str | None
    misfire_policy: str
    failure_threshold: int
    consecutive_failures: int
    disabled_reason: str | None
    overlap_policy: str
    overlap_count: int
    active_task_id: int | None
    when: str
    next_fire: str
    last_fired_at: str | None
    last_alert: str | None
    owner: str | None


class TriggerFilters(Schema):
    team: str | None = Field(None, min_length=1, max_length=64)
    state: TriggerConfig.State | None = None


class TriggerIn(Schema, TriggerFields):
    team: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=100)
    type: TriggerConfig.Type
    config: dict[str, Any]
    task: str = Field(min_length=1)


class TriggerPatch(Schema, TriggerFields):
    config: dict[str, Any] | None = None


class DisableIn(Schema):
    reason: str = Field("disabled through the API", max_length=200)


class TestOut(Schema):
    task_id: int | None
    status: Literal["queued", "skipped"]
    replaced: int | None


def _out(trigger: TriggerConfig) -> dict:
    out = trigger_summary(trigger)
    out["task"] = scrub(out["task"])
    return out


def _trigger_or_404(team: str, name: str) -> TriggerConfig:
    trigger = trigger_get(team=team_get_or_404(name=team), name=name)
    if trigger is None:
        raise NotFound(f'trigger "{name}" not found for team "{team}"')
    return trigger


@router.get("", response=list[TriggerOut], summary="Triggers, by team and name")
def triggers_list(request: HttpRequest, filters: Query[TriggerFilters]) -> list[dict]:
    team = team_get_or_404(name=filters.team) if filters.team is not None else None
    return [_out(t) for t in trigger_list(team=team, state=filters.state)]


@router.post("", response={201: TriggerOut}, summary="Create a trigger (pending)")
def triggers_create(request: HttpRequest, body: TriggerIn) -> Status:
    trigger = trigger_create(
        team=team_get_or_404(name=body.team),
        name=body.name,
        type=body.type,
        config=body.config,
        task=body.task,
        **body.options(),
    )
    return Status(201, _out(trigger))


@router.get("/{team}/{name}", response=TriggerOut, summary="One trigger")
def triggers_detail(request: HttpRequest, team: str, name: str) -> dict:
    return _out(_trigger_or_404(team, name))


@router.patch("/{team}/{name}", response=TriggerOut, summary="Update a trigger")
def triggers_update(request: HttpRequest, team: str, name: str, body: TriggerPatch) -> dict:
    trigger = _trigger_or_404(team, name)
    changes = body.changes()
    if body.config is not None:
        changes["config"] = body.config
    return _out(trigger_update(trigger=trigger, changes=changes))


@router.post("/{team}/{name}/enable", response=TriggerOut, summary="Arm a trigger")
def triggers_enable(request: HttpRequest, team: str, name: str) -> dict:
    return _out(trigger_enable(trigger=_trigger_or_404(team, name)))


@router.post("/{team}/{name}/disable", response=TriggerOut, summary="Stop a trigger")
def triggers_disable(
    request: HttpRequest, team: str, name: str, body: DisableIn | None = None
) -> dict:
    reason = body.reason if body is not None else "disabled through the API"
    return _out(trigger_disable(trigger=_trigger_or_404(team, name), reason=reason))


@router.post("/{team}/{name}/test", response=TestOut, summary="Fire once now")
def triggers_test(request: HttpRequest, team: str, name: str) -> dict:
    result = trigger_test(trigger=_trigger_or_404(team, name))
    status = "skipped" if result.outcome == "skipped" else "queued"
    return {"task_id": result.task_id, "status": status, "replaced": result.replaced_task_id}

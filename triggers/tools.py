"""Trigger tools. Only a team's parent manages its triggers (a team cannot arm itself)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from openhive.errors import NotAllowed, NotFound
from openhive.tools.context import ToolContext
from openhive.tools.registry import tool
from teams.selectors import team_get

from .firing import trigger_test
from .models import TriggerConfig
from .selectors import trigger_get, trigger_list, trigger_summary
from .services import trigger_create, trigger_disable, trigger_enable, trigger_update

OverlapPolicy = Literal["skip-then-replace", "always-skip", "always-replace", "allow"]


class TriggerSettings(BaseModel):
    """The per-type config; set only the fields of the trigger's type."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = Field(None, description="schedule: 5-field cron, e.g. '0 9 * * 1-5'")
    pattern: str | None = Field(None, description="message: optional regex (case-insensitive)")
    keywords: list[str] | None = Field(None, description="keyword: words that fire it")
    regex: str | None = Field(None, description="keyword: a regex instead of a word list")
    channel: str | None = Field(None, description="message/keyword: only this channel id")
    topic_id: int | None = Field(None, description="message/keyword: only this topic")
    rate_per_minute: int | None = Field(None, description="message/keyword: cap (default 10)")
    watch_window: str | None = Field(None, description="window: cron of the open minutes")
    tick_interval_ms: int | None = Field(None, description="window: tick cadence (>= 1000)")
    max_ticks_per_window: int | None = Field(None, description="window: tick cap (required)")
    max_tokens_per_window: int | None = Field(None, description="window: token cap (required)")

    def as_config(self) -> dict:
        return self.model_dump(exclude_none=True)


class TeamTrigger(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="One of your child teams")
    trigger_name: str = Field(min_length=1)


class CreateTriggerArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="One of your child teams")
    name: str = Field(min_length=1, description="Lowercase slug, unique in the team")
    type: Literal["schedule", "message", "keyword", "window"]
    config: TriggerSettings
    task: str = Field(min_length=1, description="What the team does when it fires")
    subagent: str | None = Field(None, description="Route straight to this subagent")
    skill: str | None = Field(None, description="Skill for the subagent (needs subagent)")
    max_turns: int | None = Field(None, ge=1, le=500)
    failure_threshold: int | None = Field(None, ge=1, le=100)
    overlap_policy: OverlapPolicy | None = None
    timezone: str | None = Field(None, description="IANA name; default the server's TZ")
    misfire_policy: Literal["skip", "run_once"] | None = None


class UpdateTriggerArgs(TeamTrigger):
    config: TriggerSettings | None = None
    task: str | None = Field(None, min_length=1)
    subagent: str | None = None
    skill: str | None = None
    max_turns: int | None = Field(None, ge=1, le=500)
    failure_threshold: int | None = Field(None, ge=1, le=100)
    overlap_policy: OverlapPolicy | None = None
    timezone: str | None = None
    misfire_policy: Literal["skip", "run_once"] | None = None


class DisableTriggerArgs(TeamTrigger):
    reason: str | None = Field(None, max_length=200)


class TestTriggerArgs(TeamTrigger):
    max_turns: int | None = Field(None, ge=1, le=500)


class ListTriggersArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="One of your child teams")


def child_team(ctx: ToolContext, name: str):
    team = team_get(name=name)
    if team is None:
        raise NotFound(f'team "{name}" not found')
    if team.parent_id != ctx.team.pk:
        raise NotAllowed(
            f'caller is not parent of target team: "{name}" is not a child of '
            f'"{ctx.team.name}"; only a team\'s parent manages its triggers',
            code="NOT_PARENT",
        )
    return team


def _trigger(ctx: ToolContext, args: TeamTrigger) -> TriggerConfig:
    team = child_team(ctx, args.team)
    trigger = trigger_get(team=team, name=args.trigger_name)
    if trigger is None:
        raise NotFound(f'trigger "{args.trigger_name}" not found for team "{team.name}"')
    return trigger


@tool(
    name="create_trigger",
    description=(
        "Create a trigger for a child team (schedule: cron; message: chat messages; keyword: "
        "words in chat; window: ticks while a cron window is open). It starts pending: call "
        "enable_trigger to arm it."
    ),
    args=CreateTriggerArgs,
)
def create_trigger(ctx: ToolContext, args: CreateTriggerArgs) -> dict:
    team = child_team(ctx, args.team)
    trigger = trigger_create(
        team=team,
        name=args.name,
        type=args.type,
        config=args.config.as_config(),
        task=args.task,
        subagent=args.subagent or "",
        skill=args.skill or "",
        max_turns=args.max_turns,
        failure_threshold=args.failure_threshold,
        overlap_policy=args.overlap_policy,
        timezone_name=args.timezone or "",
        misfire_policy=args.misfire_policy,
        source_channel=ctx.source_channel,
    )
    return {"trigger": trigger_summary(trigger)}


@tool(name="enable_trigger", description="Arm a pending or disabled trigger.", args=TeamTrigger)
def enable_trigger(ctx: ToolContext, args: TeamTrigger) -> dict:
    return {"trigger": trigger_summary(trigger_enable(trigger=_trigger(ctx, args)))}


@tool(name="disable_trigger", description="Stop a trigger firing.", args=DisableTriggerArgs)
def disable_trigger(ctx: ToolContext, args: DisableTriggerArgs) -> dict:
    trigger = trigger_disable(trigger=_trigger(ctx, args), reason=args.reason or "disabled by user")
    return {"trigger": trigger_summary(trigger)}


@tool(
    name="list_triggers",
    description="A child team's triggers with state, failures, overlap and next firing.",
    args=ListTriggersArgs,
)
def list_triggers(ctx: ToolContext, args: ListTriggersArgs) -> dict:
    team = child_team(ctx, args.team)
    return {"triggers": [trigger_summary(t) for t in trigger_list(team=team)]}


@tool(
    name="test_trigger",
    description=(
        "Fire a trigger once now, in any state. If its previous run is still active, the "
        "trigger's overlap policy decides (skip, or replace under always-replace)."
    ),
    args=TestTriggerArgs,
)
def test_trigger(ctx: ToolContext, args: TestTriggerArgs) -> dict:
    result = trigger_test(trigger=_trigger(ctx, args), max_turns=args.max_turns)
    status = "skipped" if result.outcome == "skipped" else "queued"
    return {"task_id": result.task_id, "status": status, "replaced": result.replaced_task_id}


@tool(
    name="update_trigger",
    description="Change a trigger's config, task, targeting or settings; an active one re-arms.",
    args=UpdateTriggerArgs,
    ops="org",
)
def update_trigger(ctx: ToolContext, args: UpdateTriggerArgs) -> dict:
    trigger = _trigger(ctx, args)
    changes = args.model_dump(exclude={"team", "trigger_name", "config"}, exclude_none=True)
    if args.config is not None:
        changes["config"] = args.config.as_config()
    return {"trigger": trigger_summary(trigger_update(trigger=trigger, changes=changes))}

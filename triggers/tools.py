"""Trigger tools. Only a team's ancestors manage its triggers (a team cannot arm itself): the
main agent sets up schedules for any team below it, straight from chat."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import NotFound
from openhive.core.registry import tool
from teams.guards import descendant_team

from .models import TriggerConfig
from .schemas import TriggerFields, TriggerSettings, TriggerType
from .selectors import trigger_get, trigger_list, trigger_summary
from .services import trigger_create, trigger_disable, trigger_enable, trigger_test, trigger_update


class TeamTrigger(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="One of your child teams (or a team below them)")
    trigger_name: str = Field(min_length=1)


class CreateTriggerArgs(TriggerFields):
    team: str = Field(min_length=1, description="One of your child teams (or a team below them)")
    name: str = Field(min_length=1, description="Lowercase slug, unique in the team")
    type: TriggerType
    config: TriggerSettings
    task: str = Field(min_length=1, description="What the team does when it fires")


class UpdateTriggerArgs(TeamTrigger, TriggerFields):
    config: TriggerSettings | None = None


class DisableTriggerArgs(TeamTrigger):
    reason: str | None = Field(None, max_length=200)


class TestTriggerArgs(TeamTrigger):
    max_turns: int | None = Field(None, ge=1, le=500)


class ListTriggersArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="One of your child teams (or a team below them)")


def _trigger(ctx: ToolContext, args: TeamTrigger) -> TriggerConfig:
    team = descendant_team(ctx, args.team)
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
    team = descendant_team(ctx, args.team)
    trigger = trigger_create(
        team=team,
        name=args.name,
        type=args.type,
        config=args.config.as_config(),
        task=args.task,
        source_channel=ctx.source_channel,
        # The chat that asked for it owns it: its runs' notifications go to that topic.
        owner=ctx.actor if ctx.source_channel else "",
        owner_topic_id=ctx.topic_id if ctx.source_channel else None,
        **args.options(),
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
    team = descendant_team(ctx, args.team)
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
    changes = args.changes()
    if args.config is not None:
        changes["config"] = args.config.as_config()
    return {"trigger": trigger_summary(trigger_update(trigger=trigger, changes=changes))}

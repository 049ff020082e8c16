"""Task tools: delegate_task."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from openhive.errors import NotAllowed, NotFound
from openhive.tools.context import ToolContext
from openhive.tools.registry import tool
from teams.selectors import team_get

from .models import Task
from .services import priority_from_name, task_enqueue


class DelegateTaskArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="Name of one of your child teams")
    task: str = Field(min_length=1, description="The work, self-contained")
    priority: Literal["critical", "high", "normal", "low"] = Field(default="normal")


@tool(
    name="delegate_task",
    description=(
        "Queue a task for one of your child teams. Its result is sent to the conversation "
        "that asked for it when the team finishes."
    ),
    args=DelegateTaskArgs,
)
def delegate_task(ctx: ToolContext, args: DelegateTaskArgs) -> dict:
    target = team_get(name=args.team)
    if target is None:
        raise NotFound(f'team "{args.team}" not found')
    if target.parent_id != ctx.team.pk:
        raise NotAllowed(
            f'"{args.team}" is not a child of "{ctx.team.name}": you can only delegate to your '
            "own child teams",
            code="NOT_PARENT",
        )
    task = task_enqueue(
        team=target,
        text=args.task,
        type=Task.Type.DELEGATE,
        priority=priority_from_name(args.priority),
        source_channel=ctx.source_channel,
        topic_id=ctx.topic_id,
        created_by=ctx.caller,
    )
    return {"task_id": task.pk, "enqueued": True, "team": target.name, "priority": args.priority}

"""Team tools: send_message to a parent or child, and run_subagent (a team's orchestrator hands
a piece of work to one of its subagents, which runs it in a child session of its own)."""

from __future__ import annotations

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import NotAllowed
from openhive.core.registry import tool
from openhive.engine.lineage import current_origin

from .agent import run_team_session
from .guards import existing_team
from .models import MAIN_TEAM
from .selectors import subagent_depth_of, task_is_running
from .services import teammessage_send
from .subagents import MAX_DEPTH, NAME_PATTERN, RUN_SUBAGENT, load_subagent


class SendMessageArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: str = Field(min_length=1, description="Your parent team or one of your children")
    message: str = Field(min_length=1, max_length=20_000, description="The message")


@tool(
    name="send_message",
    description=(
        "Send a message to your parent team or one of your child teams. It is stored and "
        "shown to that team at the start of its next session."
    ),
    args=SendMessageArgs,
)
def send_message(ctx: ToolContext, args: SendMessageArgs) -> dict:
    target = existing_team(args.target)
    if target.pk != ctx.team.parent_id and target.parent_id != ctx.team.pk:
        raise NotAllowed(
            f'"{args.target}" is neither the parent nor a child of "{ctx.team.name}"',
            code="not_parent_or_child",
        )
    message = teammessage_send(sender=ctx.team, recipient=target, content=args.message)
    return {"delivered_to": target.name, "message_id": message.pk}


class RunSubagentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, max_length=100, description="The subagent: a file subagents/{name}.md"
    )
    task: str = Field(
        min_length=1,
        max_length=20_000,
        description="The work, self-contained: the subagent sees only this text",
    )


@tool(
    name=RUN_SUBAGENT,
    description=(
        "Hand a piece of work to one of your subagents. It runs in a session of its own with "
        "its own identity and tools, sees only the task text you give, and you get back its "
        "final answer (`result`)."
    ),
    args=RunSubagentArgs,
)
def run_subagent(ctx: ToolContext, args: RunSubagentArgs) -> dict:
    if ctx.team.name == MAIN_TEAM:
        raise NotAllowed("the main agent has no subagents: delegate the work to a team")
    if not NAME_PATTERN.match(args.name):
        raise NotAllowed(
            f'"{args.name}" is not a subagent name (a lowercase slug)', code="unknown_subagent"
        )
    depth = subagent_depth_of(session_id=ctx.session_id)
    if depth >= MAX_DEPTH:
        raise NotAllowed(
            f"subagents may nest only {MAX_DEPTH} deep: do this work yourself",
            code="subagent_depth_limit",
        )
    load_subagent(ctx.team.name, args.name)  # refuses an unknown or broken file before a session
    outcome = run_team_session(
        ctx.team,
        args.task,
        subagent=args.name,
        depth=depth + 1,
        # The child's spend and turns belong to the same task: its budget counts them.
        task_id=ctx.task_id,
        source_channel=ctx.source_channel,
        should_cancel=_task_stopped(ctx.task_id),
        timeout_seconds=settings.TASK_TIMEOUT_SECONDS,
        origin=current_origin(),
    )
    found = {"subagent": args.name, "session_id": outcome.session_id}
    if outcome.ok:
        return {**found, "result": outcome.content}
    return {
        "success": False,
        **found,
        "error": (
            f'subagent "{args.name}" stopped ({outcome.stop_reason}): '
            f"{outcome.error or outcome.content}"
        )[:4000],
        "code": f"SUBAGENT_{outcome.stop_reason.upper()}",
        "result": outcome.content,
    }


def _task_stopped(task_id: int | None):
    """The child stops with the task it serves (cancelled, or handed to another worker)."""
    if task_id is None:
        return None

    def stopped() -> bool:
        return not task_is_running(task_id=task_id)

    return stopped

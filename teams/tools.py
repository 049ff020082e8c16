"""Team tools that concern only the tree as data: send_message to a parent or child."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import NotAllowed
from openhive.core.registry import tool

from .guards import existing_team
from .services import teammessage_send


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

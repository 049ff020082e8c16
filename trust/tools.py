"""Trust tools for the main agent only: add_trusted_sender, revoke_sender_trust,
list_trusted_senders. Child teams get a NOT_ALLOWED error whatever their allowlist says."""

from __future__ import annotations

from typing import Literal

from django.contrib.auth import get_user_model
from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import NotAllowed
from openhive.core.registry import tool
from teams.models import MAIN_TEAM

from .selectors import sender_trust_list, sender_trust_summary
from .services import sender_trust_revoke, sender_trust_set


def _main_only(ctx: ToolContext) -> None:
    if ctx.team.name != MAIN_TEAM:
        raise NotAllowed(
            f'only the main agent manages sender trust; team "{ctx.team.name}" cannot',
            code="not_allowed",
        )


def _staff_for_changes(ctx: ToolContext) -> None:
    """In a chat turn, a change of trust needs a person who may make it: the verified sender
    must be a staff user. Anyone else (an allowed stranger, an asserted id) could otherwise
    talk the model into trusting themselves or silencing the operator."""
    if not ctx.actor.startswith("user:"):
        return  # an operator's command line or a system job
    username = ctx.actor.removeprefix("user:")
    if not get_user_model().objects.filter(username=username, is_staff=True).exists():
        raise NotAllowed(
            "changing sender trust needs a staff user; ask an operator (admin or REST API)",
            code="not_allowed",
        )


class AddTrustedSenderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel_type: str = Field(min_length=1, max_length=40, description="Channel type, e.g. ws")
    sender_id: str = Field(min_length=1, max_length=200, description="The sender's id")
    channel_id: str = Field(
        default="", max_length=200, description="One conversation (e.g. ws:user:3); empty = all"
    )
    trust_level: Literal["trusted", "denied"] = Field(
        default="trusted", description="trusted lets them in; denied silences them"
    )


@tool(
    name="add_trusted_sender",
    description=(
        "Trust a sender (or explicitly deny one) on a channel type, everywhere or in one "
        "conversation. Main agent only."
    ),
    args=AddTrustedSenderArgs,
    ops="org",
    teams=(MAIN_TEAM,),
)
def add_trusted_sender(ctx: ToolContext, args: AddTrustedSenderArgs) -> dict:
    _main_only(ctx)
    _staff_for_changes(ctx)
    row = sender_trust_set(
        channel_type=args.channel_type,
        sender_id=args.sender_id,
        channel_id=args.channel_id,
        trust_level=args.trust_level,
        granted_by=ctx.caller,
    )
    return {"sender": sender_trust_summary(row)}


class RevokeSenderTrustArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel_type: str = Field(min_length=1, max_length=40)
    sender_id: str = Field(min_length=1, max_length=200)
    channel_id: str = Field(default="", max_length=200, description="Empty = the global entry")


@tool(
    name="revoke_sender_trust",
    description="Remove a stored trust or denial; the policy decides about the sender again.",
    args=RevokeSenderTrustArgs,
    ops="org",
    teams=(MAIN_TEAM,),
)
def revoke_sender_trust(ctx: ToolContext, args: RevokeSenderTrustArgs) -> dict:
    _main_only(ctx)
    _staff_for_changes(ctx)
    sender_trust_revoke(
        channel_type=args.channel_type, sender_id=args.sender_id, channel_id=args.channel_id
    )
    return {"revoked": True, "sender_id": args.sender_id, "channel_type": args.channel_type}


class ListTrustedSendersArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel_type: str = Field(default="", max_length=40, description="Filter; empty = all")
    trust_level: Literal["trusted", "denied", ""] = Field(default="", description="Filter")


@tool(
    name="list_trusted_senders",
    description="List stored sender trust and denials. Main agent only.",
    args=ListTrustedSendersArgs,
    teams=(MAIN_TEAM,),
)
def list_trusted_senders(ctx: ToolContext, args: ListTrustedSendersArgs) -> dict:
    _main_only(ctx)
    rows = sender_trust_list(
        channel_type=args.channel_type or None, trust_level=args.trust_level or None
    )[:200]
    return {"senders": [sender_trust_summary(r) for r in rows]}

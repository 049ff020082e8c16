"""Chat tools for the main agent's turn: start_new_topic (offered when the conversation has
exactly one active topic, so the agent itself decides whether a message continues it)."""

from __future__ import annotations

from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import NotAllowed
from openhive.core.registry import tool
from teams.models import MAIN_TEAM

from .services import topic_open
from .topics import TOPIC_NAME_CHARS

START_NEW_TOPIC = "start_new_topic"
# The effect the tool reports to the turn: the id of the topic it opened (the first one wins).
TOPIC_OPENED = "topic_opened"


class StartNewTopicArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, max_length=TOPIC_NAME_CHARS, description="Short name of the new subject"
    )
    description: str = Field(default="", max_length=500, description="One line about it")


@tool(
    name=START_NEW_TOPIC,
    description=(
        "Call this first, before anything else, when the user's message starts a subject "
        "unrelated to the current topic: the message and your answer are filed under a new "
        "topic. Do not call it when the message continues the current topic."
    ),
    args=StartNewTopicArgs,
    teams=(MAIN_TEAM,),
)
def start_new_topic(ctx: ToolContext, args: StartNewTopicArgs) -> dict:
    if ctx.team.name != MAIN_TEAM or not ctx.source_channel:
        raise NotAllowed("only the main agent's chat turn can open a topic", code="not_allowed")
    topic = topic_open(
        channel_id=ctx.source_channel,
        name=args.name,
        description=args.description,
        now=timezone.now(),
    )
    ctx.effects.setdefault(TOPIC_OPENED, topic.pk)
    return {"topic_id": topic.pk, "topic_name": topic.name}

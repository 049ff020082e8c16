"""A chat turn: the main agent answers one message in one topic, with the routing tools only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from openhive.engine.models import Session
from openhive.engine.providers import not_configured_message, providers_configured
from openhive.engine.session import SessionRequest, run_session
from teams.services import team_ensure_main

from .models import Message, Topic
from .selectors import topic_history
from .services import message_record, message_rescrub, topic_default
from .signals import message_received

ROUTING_TOOLS = ["spawn_team", "delegate_task", "list_teams"]


@dataclass
class Inbound:
    topic: Topic
    message: Message


@dataclass
class TurnResult:
    ok: bool
    content: str = ""
    error_code: str = ""
    error: str = ""


def chat_receive(*, channel_id: str, sender_id: str, content: str, topic_id: int | None) -> Inbound:
    """Store an inbound message in its topic (the default topic when none is named)."""
    topic = None
    if topic_id is not None:
        topic = Topic.objects.filter(pk=topic_id, channel_id=channel_id).first()
        if topic is None:
            raise LookupError(f"topic {topic_id} does not exist in this conversation")
    topic = topic or topic_default(channel_id=channel_id)
    message = message_record(
        topic=topic, sender_id=sender_id, role=Message.Role.USER, content=content
    )
    message_received.send(
        sender=Message, message=message, topic=topic, channel_id=channel_id, sender_id=sender_id
    )
    return Inbound(topic=topic, message=message)


def chat_turn(
    *, inbound: Inbound, sender_id: str, on_event: Callable[[dict], None] | None = None
) -> TurnResult:
    """Runs in a worker thread; closes its own database connection when done."""
    try:
        if not providers_configured():
            return TurnResult(
                False, error_code="provider_not_configured", error=not_configured_message()
            )
        main = team_ensure_main()
        limit = settings.OPENHIVE["CHAT_HISTORY_MESSAGES"]
        history = [m for m in topic_history(topic=inbound.topic, limit=limit + 1)][
            :-1
        ]  # the inbound message itself is sent as the new user turn
        outcome = run_session(
            SessionRequest(
                team=main,
                content=inbound.message.content,
                kind=Session.Kind.CHAT,
                topic=inbound.topic,
                history=history,
                only_tools=ROUTING_TOOLS,
                source_channel=inbound.topic.channel_id,
                actor=f"user:{sender_id}",
                on_event=on_event,
            )
        )
        message_rescrub(message_id=inbound.message.pk)
        if not outcome.ok:
            return TurnResult(
                False, error_code="turn_failed", error=outcome.error or outcome.content
            )
        message_record(
            topic=inbound.topic,
            sender_id="main",
            role=Message.Role.ASSISTANT,
            content=outcome.content,
        )
        return TurnResult(True, content=outcome.content)
    finally:
        connection.close()

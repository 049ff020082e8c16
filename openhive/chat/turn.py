"""The path of one inbound chat message: admit (trust gate, then store), route to a topic, and
the main agent's turn in that topic with the routing tools."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import OperationalError

from openhive.engine.models import Session
from openhive.engine.providers import provider_problem
from teams.agent import run_team_session
from teams.config import load_team_config, team_config_problem
from teams.services import team_ensure_main

# Admission lives in admit.py; these names stay importable from here.
from .admit import Inbound, Unavailable, chat_receive  # noqa: F401
from .classifier import classify_topic
from .models import Message, Topic
from .selectors import topic_get, topic_history
from .services import chat_route, message_move, message_record, message_rescrub
from .tools import START_NEW_TOPIC, TOPIC_OPENED
from .topics import SINGLE, Routed

logger = logging.getLogger(__name__)

# The main agent routes: it shapes the tree, hands out work and relays answers; it never
# does a team's work itself, so no file, web or memory tools here.
ROUTING_TOOLS = [
    "spawn_team",
    "delegate_task",
    "list_teams",
    "get_status",
    "list_completed_tasks",
    "query_team",
    "query_teams",
    "update_team",
    "shutdown_team",
]
ROUTE_ATTEMPTS = 6
TRUST_TOOLS = ["add_trusted_sender", "revoke_sender_trust", "list_trusted_senders"]
# Deciding when a team wakes (a schedule, a watch window, a keyword) is routing too: the user
# asks in chat, the trigger belongs to a team below main and its results come back here.
TRIGGER_TOOLS = [
    "create_trigger",
    "update_trigger",
    "enable_trigger",
    "disable_trigger",
    "test_trigger",
    "list_triggers",
]


@dataclass
class TurnResult:
    ok: bool
    topic: Topic
    content: str = ""
    error_code: str = ""
    error: str = ""
    topic_moved: bool = False


def route_inbound(inbound: Inbound) -> Routed:
    """Runs in a worker thread (the classifier may call a model). SQLite allows one writer: a
    write lock held by a turn of another topic is waited out, not turned into a lost message.
    The thread's database connection is its executor's to keep or close (`turnpool`)."""
    assert inbound.message is not None and inbound.decision.allowed
    for attempt in range(ROUTE_ATTEMPTS):
        try:
            return chat_route(
                message=inbound.message,
                topic_id=inbound.topic_id,
                new_topic=inbound.new_topic,
                classify=classify_topic,
            )
        except OperationalError as exc:
            if "locked" not in str(exc) or attempt == ROUTE_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


CONFIG_BROKEN = (
    "The main agent cannot answer right now: its configuration has a problem. An operator can "
    "see what is wrong in the admin (Teams, main) or with `manage.py openhive status`."
)


def chat_turn(
    *, routed: Routed, message: Message, sender_id: str, on_event: Callable[[dict], None] | None
) -> TurnResult:
    """Runs in a worker thread; its database connection is its executor's to keep or close."""
    topic = routed.topic
    main = team_ensure_main()
    problem = team_config_problem(main.name)
    if problem:
        # Operators get the detail (file and key); the person chatting gets a sentence.
        logger.error("chat turn refused: %s", problem)
        return TurnResult(False, topic, error_code="config_error", error=CONFIG_BROKEN)
    # The real reason (no file, a YAML error, a broken profile, an unset key variable),
    # for the profile the main agent actually uses.
    problem = provider_problem(load_team_config(main.name).provider_profile)
    if problem:
        return TurnResult(False, topic, error_code="provider_not_configured", error=problem)
    limit = settings.OPENHIVE["CHAT_HISTORY_MESSAGES"]
    tools = [*ROUTING_TOOLS, *TRUST_TOOLS, *TRIGGER_TOOLS]
    if routed.mode == SINGLE:
        tools.append(START_NEW_TOPIC)
    outcome = run_team_session(
        main,
        message.content,
        kind=Session.Kind.CHAT,
        topic_id=topic.pk,
        topic_name=topic.name,
        history=topic_history(topic=topic, limit=limit, before_id=message.pk),
        only_tools=tools,
        source_channel=topic.channel_id,
        actor=f"user:{sender_id}",
        on_event=on_event,
        # The reply's text reaches the socket as it is produced (delta events).
        stream=on_event is not None,
    )
    message_rescrub(message=message)
    opened = outcome.effects.get(TOPIC_OPENED)
    new_topic = topic_get(topic_id=opened) if opened else None
    if new_topic is not None:
        topic = new_topic
        message_move(message_ids=[message.pk], topic=topic)
    if not outcome.ok:
        return TurnResult(
            False,
            topic,
            error_code="turn_failed",
            error=outcome.plain_error or outcome.error or outcome.content,
            topic_moved=new_topic is not None,
        )
    message_record(
        topic=topic,
        sender_id="main",
        role=Message.Role.ASSISTANT,
        content=outcome.content,
        in_reply_to=message,
    )
    return TurnResult(True, topic, content=outcome.content, topic_moved=new_topic is not None)

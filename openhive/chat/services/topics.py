"""State changes of topics: open, reactivate, idle out, and route an admitted message to one.

Routing (a message that names no topic and does not ask for a new one):
- no active topic      → open a new one (no model involved);
- one active topic     → that topic; the main agent's turn may move the message to a new topic
                          with the `start_new_topic` tool (its decision, not a guess in code);
- two or more          → a small classifier call picks one or asks for a new one.
At most MAX_ACTIVE_TOPICS are active per channel: opening or reactivating one more idles the
least recently active. A topic quiet for longer than the idle period becomes idle.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from ..models import Message, Topic
from ..selectors import active_topics, topic_in_channel
from ..signals import message_received
from ..topics import (
    CLASSIFIED,
    CLASSIFIED_NEW,
    MAX_ACTIVE_TOPICS,
    NAMED,
    NEW,
    SINGLE,
    Classifier,
    Pick,
    Routed,
    idle_after,
    topic_name_from,
)

logger = logging.getLogger(__name__)


def topics_idle_stale(*, now: datetime, channel_id: str | None = None) -> list[str]:
    """Idle every active topic quiet for longer than the idle period; returns the channels
    whose topic list changed."""
    stale = Topic.objects.filter(state=Topic.State.ACTIVE, last_activity_at__lt=now - idle_after())
    if channel_id is not None:
        stale = stale.filter(channel_id=channel_id)
    channels = sorted(set(stale.values_list("channel_id", flat=True)))
    if channels:
        stale.update(state=Topic.State.IDLE)
    return channels


def _make_room(channel_id: str, keep: int | None = None) -> None:
    """Idle the least recently active topics so one more fits under the cap."""
    active = [t for t in active_topics(channel_id=channel_id) if t.pk != keep]
    for topic in active[MAX_ACTIVE_TOPICS - 1 :]:
        Topic.objects.filter(pk=topic.pk).update(state=Topic.State.IDLE)


@transaction.atomic
def topic_open(*, channel_id: str, name: str, description: str = "", now: datetime) -> Topic:
    _make_room(channel_id)
    return Topic.objects.create(
        channel_id=channel_id,
        name=(name.strip() or "New topic")[:200],
        description=description[:2000],
        state=Topic.State.ACTIVE,
        last_activity_at=now,
    )


@transaction.atomic
def topic_activate(*, topic: Topic, now: datetime) -> bool:
    """Make a topic active again (and touch it); True if its state changed."""
    changed = topic.state != Topic.State.ACTIVE
    if changed:
        _make_room(topic.channel_id, keep=topic.pk)
    Topic.objects.filter(pk=topic.pk).update(state=Topic.State.ACTIVE, last_activity_at=now)
    topic.state, topic.last_activity_at = Topic.State.ACTIVE, now
    return changed


def chat_route(
    *,
    message: Message,
    topic_id: int | None,
    classify: Classifier,
    new_topic: bool = False,
    now: datetime | None = None,
) -> Routed:
    """File an admitted message under a topic, then tell the triggers about it."""
    now = now or timezone.now()
    channel_id = message.channel_id
    changed = bool(topics_idle_stale(now=now, channel_id=channel_id))
    if topic_id is not None:
        topic = topic_in_channel(channel_id=channel_id, topic_id=topic_id)
        changed |= topic_activate(topic=topic, now=now)
        mode = NAMED
    else:
        active = active_topics(channel_id=channel_id)
        if not active or new_topic:
            topic, mode = (
                topic_open(channel_id=channel_id, name=topic_name_from(message.content), now=now),
                NEW,
            )
            changed = True
        elif len(active) == 1:
            topic, mode = active[0], SINGLE
            topic_activate(topic=topic, now=now)
        else:
            topic, mode, opened = _classified(message, active, classify, now)
            changed |= opened
    message_move(message_ids=[message.pk], topic=topic)
    message.topic = topic
    message_received.send(
        sender=Message,
        message=message,
        topic=topic,
        channel_id=channel_id,
        sender_id=message.sender_id,
    )
    return Routed(topic=topic, mode=mode, topics_changed=changed)


def _classified(
    message: Message, active: list[Topic], classify: Classifier, now: datetime
) -> tuple[Topic, str, bool]:
    try:
        pick = classify(channel_id=message.channel_id, content=message.content, topics=active)
    except Exception:
        # No answer is treated like "new": filing a message under an unrelated thread would
        # hand the wrong history to the model.
        logger.exception("topic classifier failed; opening a new topic")
        pick = Pick()
    chosen = next((t for t in active if t.pk == pick.topic_id), None)
    if chosen is not None:
        topic_activate(topic=chosen, now=now)
        return chosen, CLASSIFIED, False
    name = pick.new_name or topic_name_from(message.content)
    topic = topic_open(channel_id=message.channel_id, name=name, now=now)
    return topic, CLASSIFIED_NEW, True


def message_move(*, message_ids: list[int], topic: Topic) -> None:
    """The turn decided the message starts a new topic: refile it (and the reply)."""
    Message.objects.filter(pk__in=message_ids).update(topic=topic)

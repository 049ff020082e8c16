"""The outbox: results produced away from the socket (a worker's result, a bootstrap notice)
that must reach a chat channel, written in the producer's transaction and pushed on commit.

Every delivery is also stored as a chat message in that same transaction (role = its kind,
with the team and the task), so it stays in the topic's history after a reload. Which topic:
the one the producer names (a task started from a topic names it); a delivery that names none
(a trigger's alert, an escalation from a task nobody asked for in chat) has no topic and lives
in the channel's notifications."""

from __future__ import annotations

import hashlib
import logging

from django.db import transaction
from django.utils import timezone

from openhive.core.scrubbing import scrub

from ..models import Message, OutboxMessage, Topic

logger = logging.getLogger(__name__)


def channel_group(channel_id: str) -> str:
    """A channel-layer group name for a chat channel (group names allow few characters)."""
    return "outbox-" + hashlib.sha256(channel_id.encode()).hexdigest()[:32]


@transaction.atomic
def outbox_put(
    *,
    channel_id: str,
    content: str,
    topic_id: int | None = None,
    team_name: str = "",
    task_id: int | None = None,
    kind: str = OutboxMessage.Kind.NOTIFICATION,
    task_status: str = "",
    data: dict | None = None,
) -> OutboxMessage:
    content = scrub(content)
    # A topic that was deleted meanwhile must not make the producer's transaction fail.
    if topic_id is not None and not Topic.objects.filter(pk=topic_id).exists():
        topic_id = None
    message = Message.objects.create(
        topic_id=topic_id,
        channel_id=channel_id,
        role=DELIVERY_ROLES.get(kind, Message.Role.NOTIFICATION),
        content=without_team_tag(content, team_name),
        team_name=team_name,
        task_id=task_id,
        task_status=task_status[:20],
    )
    item = OutboxMessage.objects.create(
        channel_id=channel_id,
        topic_id=topic_id,
        team_name=team_name,
        content=content,
        task_id=task_id,
        kind=kind,
        message=message,
        data=data or {},
    )
    transaction.on_commit(lambda: _wake(channel_id))
    return item


DELIVERY_ROLES = {
    OutboxMessage.Kind.NOTIFICATION: Message.Role.NOTIFICATION,
    OutboxMessage.Kind.RESULT: Message.Role.RESULT,
    OutboxMessage.Kind.ESCALATION: Message.Role.ESCALATION,
    OutboxMessage.Kind.RESPONSE: Message.Role.ASSISTANT,
}


def without_team_tag(content: str, team_name: str) -> str:
    """Producers write "[ops] Disk is at 40%." for channels that show only text; the page and
    the history name the team beside the message, so the stored copy drops the tag."""
    tag = f"[{team_name}] " if team_name else ""
    return content[len(tag) :] if tag and content.startswith(tag) else content


def topics_changed_notify(*, channel_id: str) -> None:
    """Tell the channel's sockets (in any web process) to resend their topic list."""
    _group_send(channel_id, {"type": "topics.changed"})


def _wake(channel_id: str) -> None:
    """Nudge the channel's sockets to read the outbox now (they also poll, so a lost nudge
    only delays delivery)."""
    _group_send(channel_id, {"type": "outbox.wake"})


def _group_send(channel_id: str, event: dict) -> None:
    try:
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(channel_group(channel_id), event)
    except Exception:
        logger.debug("channel-layer send failed", exc_info=True)


def outbox_mark_delivered(*, ids: list[int]) -> int:
    return OutboxMessage.objects.filter(pk__in=ids, delivered_at__isnull=True).update(
        delivered_at=timezone.now()
    )


def outbox_unmark_delivered(*, ids: list[int]) -> int:
    return OutboxMessage.objects.filter(pk__in=ids).update(delivered_at=None)

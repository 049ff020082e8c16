"""State changes of chat messages: admit an inbound one, record an answer, re-scrub."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from openhive.core.db import statements_in_one_query
from openhive.core.rows import insert_new
from openhive.core.scrubbing import scrub

from ..models import Message, Topic


def message_admit(
    *,
    channel_id: str,
    sender_id: str,
    sender_asserted: bool,
    content: str,
    trust_decision: str,
    trust_reason: str,
) -> Message:
    """Store an inbound message with the trust gate's decision, before routing (no topic yet;
    a refused one never gets one, so it can never reach a prompt)."""
    return Message.objects.create(
        topic=None,
        channel_id=channel_id,
        sender_id=sender_id,
        sender_asserted=sender_asserted,
        role=Message.Role.USER,
        content=scrub(content),
        trust_decision=trust_decision,
        trust_reason=trust_reason,
    )


def message_record(
    *, topic: Topic, sender_id: str, role: str, content: str, in_reply_to: Message | None = None
) -> Message:
    """Store a message of `topic` and mark the topic active. On PostgreSQL both go in one query
    (one round trip and one commit, where each took its own: a chat turn's answer is sent once
    it is stored)."""
    now = timezone.now()
    # Activity only: whether the topic is active is routing's business (the cap of five).
    touch: tuple[str, list] | None = None
    if statements_in_one_query():  # sent ahead of the INSERT, in its query
        table = connection.ops.quote_name(Topic._meta.db_table)
        touch = (f"UPDATE {table} SET last_activity_at = %s WHERE id = %s", [now, topic.pk])
    else:
        Topic.objects.filter(pk=topic.pk).update(last_activity_at=now)
    (message,) = insert_new(
        Message,
        [
            {
                "topic_id": topic.pk,
                "channel_id": topic.channel_id,
                "sender_id": sender_id,
                "role": role,
                "content": scrub(content),
                "in_reply_to_id": in_reply_to.pk if in_reply_to is not None else None,
                "created_at": now,
            }
        ],
        after=touch,
    )
    return message


def message_rescrub(*, message: Message) -> None:
    """Re-scrub a stored message once a turn has revealed new secrets (e.g. credentials that
    were typed into the very message that handed them over). `message` holds the text as it
    was stored: it is scrubbed again here and written only if that changed it (and only over
    that same text), so a turn that revealed nothing costs no query."""
    stored = message.content
    cleaned = scrub(stored)
    if cleaned != stored:
        Message.objects.filter(pk=message.pk, content=stored).update(content=cleaned)
        message.content = cleaned


def message_admit_many(
    admissions: list[dict], *, after: tuple[str, list] | None = None
) -> list[Message]:
    """`message_admit` for many messages in one insert (each dict holds its arguments), built by
    `insert_new`: through bulk_create, a chat burst's rows cost the web process a third of each
    ack. `after`: a statement sent first in the same query (`insert_new`)."""
    return insert_new(
        Message,
        [
            {
                "topic_id": None,
                "channel_id": a["channel_id"],
                "sender_id": a["sender_id"],
                "sender_asserted": a["sender_asserted"],
                "role": Message.Role.USER,
                "content": scrub(a["content"]),
                "trust_decision": a["trust_decision"],
                "trust_reason": a["trust_reason"],
            }
            for a in admissions
        ],
        after=after,
    )

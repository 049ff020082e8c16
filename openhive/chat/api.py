"""REST: chat topics and their messages (/api/v1/topics), for operators and scripts. Any
identity may call these: an operator sees every conversation, a chat user only their own."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from openhive.core.errors import NotFound
from openhive.core.scrubbing import scrub
from trust.services import ApiIdentity

from .models import Message, Topic
from .selectors import user_channel_id

# Mounted with the API's member auth (openhive/api.py): any identity may call these.
router = Router(tags=["topics"])


def _own_channel(request: HttpRequest) -> str | None:
    """None for an operator (every channel); a chat user's own conversation otherwise."""
    identity: ApiIdentity = request.api_identity  # type: ignore[attr-defined]  # set by auth
    return None if identity.is_operator else user_channel_id(identity.user.pk)


class TopicOut(Schema):
    id: int
    channel_id: str
    name: str
    description: str
    state: str
    created_at: datetime
    last_activity_at: datetime


class TopicFilters(Schema):
    channel_id: str | None = Field(None, min_length=1, max_length=200)
    state: Literal["active", "idle", "closed"] | None = None
    limit: int = Field(50, ge=1, le=200)
    offset: int = Field(0, ge=0, le=1_000_000_000)


class MessageOut(Schema):
    id: int
    # user, assistant, or what reached the person from a team: result, notification, escalation
    role: str
    sender_id: str
    sender_asserted: bool
    content: str
    trust_decision: str
    in_reply_to: int | None
    team: str
    task_id: int | None
    task_status: str
    created_at: datetime


class MessageFilters(Schema):
    limit: int = Field(100, ge=1, le=500)


@router.get("", response=list[TopicOut], summary="Topics, most recently active first")
def topics_list(request: HttpRequest, filters: Query[TopicFilters]) -> list[Topic]:
    rows = Topic.objects.order_by("-last_activity_at", "-id")
    own = _own_channel(request)
    if own is not None:
        rows = rows.filter(channel_id=own)
    if filters.channel_id:
        rows = rows.filter(channel_id=filters.channel_id)
    if filters.state:
        rows = rows.filter(state=filters.state)
    return list(rows[filters.offset : filters.offset + filters.limit])


@router.get(
    "/{topic_id}/messages",
    response=list[MessageOut],
    summary="A topic's messages, results and notifications, in order",
)
def topic_messages(request: HttpRequest, topic_id: int, filters: Query[MessageFilters]) -> list:
    topics = Topic.objects.filter(pk=topic_id)
    own = _own_channel(request)
    if own is not None:
        topics = topics.filter(channel_id=own)
    # Another user's topic is "not found" too: its existence is not theirs to learn.
    if not 0 < topic_id < 2**63 or not topics.exists():
        raise NotFound(f"topic {topic_id} not found")
    rows = list(Message.objects.filter(topic_id=topic_id).order_by("-id")[: filters.limit])
    return [
        {
            "id": m.pk,
            "role": m.role,
            "sender_id": m.sender_id,
            "sender_asserted": m.sender_asserted,
            "content": scrub(m.content),
            "trust_decision": m.trust_decision,
            "in_reply_to": m.in_reply_to_id,
            "team": m.team_name,
            "task_id": m.task_id,
            "task_status": m.task_status,
            "created_at": m.created_at,
        }
        for m in reversed(rows)
    ]

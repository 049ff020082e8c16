from openhive.core.errors import NotFound
from openhive.engine.models import Session, ToolCall

from .models import CONVERSATION_ROLES, Message, OutboxMessage, Topic


def user_channel_id(user_id: int) -> str:
    """The conversation of a verified user (session or API token) on the chat socket."""
    return f"ws:user:{user_id}"


# SQLite caps the number of query parameters; stay well below every limit.
IN_CHUNK = 500


def outbox_undelivered(*, channel_id: str, limit: int = 100) -> list[OutboxMessage]:
    return list(
        OutboxMessage.objects.filter(channel_id=channel_id, delivered_at__isnull=True)
        .select_related("topic", "message")
        .order_by("id")[:limit]
    )


def outbox_pending_channels(*, channel_ids: list[str]) -> set[str]:
    """Which of these channels have undelivered outbox rows: one query per 500 channels, so
    one poller can serve every socket of a process."""
    found: set[str] = set()
    for start in range(0, len(channel_ids), IN_CHUNK):
        chunk = channel_ids[start : start + IN_CHUNK]
        found.update(
            OutboxMessage.objects.filter(delivered_at__isnull=True, channel_id__in=chunk)
            .values_list("channel_id", flat=True)
            .distinct()
        )
    return found


def topic_history(*, topic: Topic, limit: int, before_id: int | None = None) -> list[dict]:
    """The last messages of a topic as LLM chat messages, each answer after its question. The
    history is always rebuilt from what is stored, so a restart loses nothing. With
    `before_id`, messages that arrived after that one (still waiting for their turn) are left
    out."""
    # Deliveries (results, notifications) are the person's view; the model's history is the
    # conversation it took part in.
    rows = Message.objects.filter(topic=topic, role__in=CONVERSATION_ROLES)
    if before_id is not None:
        rows = rows.exclude(role=Message.Role.USER, pk__gte=before_id)
    last = list(rows.order_by("-id")[:limit])
    last.sort(key=lambda m: (m.in_reply_to_id or m.pk, m.role == Message.Role.ASSISTANT, m.pk))
    return [{"role": m.role, "content": m.content} for m in last]


def topic_messages(*, topic: Topic, limit: int = 200) -> list[Message]:
    rows = Message.objects.filter(topic=topic).select_related("topic")
    return list(reversed(rows.order_by("-id")[:limit]))


def channel_deliveries(*, channel_id: str, limit: int = 50) -> list[Message]:
    """The latest results, notifications and escalations that reached a channel, any topic or
    none, oldest first: the page's notifications panel."""
    rows = Message.objects.filter(channel_id=channel_id).exclude(role__in=CONVERSATION_ROLES)
    return list(reversed(rows.select_related("topic").order_by("-id")[:limit]))


def topic_tool_calls(*, topic: Topic, limit: int = 200) -> list[ToolCall]:
    """The main agent's tool calls in a topic's turns (from the audit), oldest first, so a
    reloaded thread still shows what the agent did and what failed."""
    rows = ToolCall.objects.filter(session__topic=topic, session__kind=Session.Kind.CHAT)
    return list(reversed(rows.order_by("-id")[:limit]))


def topic_get(*, topic_id: int) -> Topic | None:
    return Topic.objects.filter(pk=topic_id).first()


def topics_for_channel(*, channel_id: str) -> list[Topic]:
    return list(
        Topic.objects.filter(channel_id=channel_id)
        .exclude(state=Topic.State.CLOSED)
        .order_by("-last_activity_at", "-id")
    )


def active_topics(*, channel_id: str) -> list[Topic]:
    return list(
        Topic.objects.filter(channel_id=channel_id, state=Topic.State.ACTIVE).order_by(
            "-last_activity_at", "-id"
        )
    )


def topic_in_channel(*, channel_id: str, topic_id: int) -> Topic:
    """A topic the client named. Ids are looked up as ids, only within the caller's channel."""
    topic = (
        Topic.objects.filter(pk=topic_id, channel_id=channel_id)
        .exclude(state=Topic.State.CLOSED)
        .first()
    )
    if topic is None:
        raise NotFound(
            f"topic {topic_id} does not exist in this conversation", code="unknown_topic"
        )
    return topic

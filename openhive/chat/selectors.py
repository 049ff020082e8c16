from .models import Message, OutboxMessage, Topic


def outbox_undelivered(*, channel_id: str, limit: int = 100) -> list[OutboxMessage]:
    return list(
        OutboxMessage.objects.filter(channel_id=channel_id, delivered_at__isnull=True)
        .select_related("topic")
        .order_by("id")[:limit]
    )


def topic_history(*, topic: Topic, limit: int) -> list[dict]:
    """The last messages of a topic as LLM chat messages, oldest first."""
    rows = list(Message.objects.filter(topic=topic).order_by("-created_at", "-id")[:limit])
    return [{"role": m.role, "content": m.content} for m in reversed(rows)]


def topics_for_channel(*, channel_id: str) -> list[Topic]:
    return list(Topic.objects.filter(channel_id=channel_id).exclude(state=Topic.State.CLOSED))

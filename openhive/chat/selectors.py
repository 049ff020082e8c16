import functools

from django.db.models import Q, QuerySet

from memory.history import MAX_CANDIDATES, HistoryDoc, any_term, capped
from openhive.core.compiled import CompiledQuery
from openhive.core.errors import NotFound
from openhive.core.inlist import any_of
from openhive.core.scrubbing import scrub
from openhive.engine.models import Session, ToolCall

from .models import CONVERSATION_ROLES, Message, OutboxMessage, Topic


def user_channel_id(user_id: int) -> str:
    """The conversation of a verified user (session or API token) on the chat socket."""
    return f"ws:user:{user_id}"


def _undelivered(channel_id: str) -> QuerySet[OutboxMessage]:
    return OutboxMessage.objects.filter(channel_id=channel_id, delivered_at__isnull=True).order_by(
        "id"
    )


# Read at every socket's connect, and almost always empty: in a reconnect storm, the ORM's
# query (compiled anew each time, with its topic and message joined) on the chat database
# threads took the GIL from the acks of the messages the first sockets were already sending.
_ANY_UNDELIVERED = CompiledQuery(lambda channel_id: _undelivered(channel_id)[:1])


def outbox_undelivered(*, channel_id: str, limit: int = 100) -> list[OutboxMessage]:
    if not _ANY_UNDELIVERED.rows(OutboxMessage, channel_id=channel_id):
        return []
    return list(_undelivered(channel_id).select_related("topic", "message")[:limit])


def outbox_pending_channels(*, channel_ids: list[str]) -> set[str]:
    """Which of these channels have undelivered outbox rows: one query for them all, so one
    poller can serve every socket of a process."""
    return set(
        OutboxMessage.objects.filter(delivered_at__isnull=True, channel_id__in=any_of(channel_ids))
        .values_list("channel_id", flat=True)
        .distinct()
    )


def _conversation(topic_id: int, before_id: int) -> QuerySet[Message]:
    # Deliveries (results, notifications) are the person's view; the model's history is the
    # conversation it took part in.
    rows = Message.objects.filter(topic_id=topic_id, role__in=CONVERSATION_ROLES)
    return rows.exclude(role=Message.Role.USER, pk__gte=before_id).order_by("-id")


@functools.cache
def _conversation_query(limit: int) -> CompiledQuery:
    """Read at every chat turn, in the turn host beside the web process: compiled once per
    history length (the LIMIT is in the SQL's text), not at each turn."""
    return CompiledQuery(lambda topic_id, before_id: _conversation(topic_id, before_id)[:limit])


# Above every message's id: the history read without `before_id` leaves none out.
_NONE_LATER = 2**62


def topic_history(*, topic: Topic, limit: int, before_id: int | None = None) -> list[dict]:
    """The last messages of a topic as LLM chat messages, each answer after its question. The
    history is always rebuilt from what is stored, so a restart loses nothing. With
    `before_id`, messages that arrived after that one (still waiting for their turn) are left
    out."""
    later = _NONE_LATER if before_id is None else before_id
    last = _conversation_query(limit).rows(Message, topic_id=topic.pk, before_id=later)
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


def _open_topics(channel_id: str) -> QuerySet[Topic]:
    return (
        Topic.objects.filter(channel_id=channel_id)
        .exclude(state=Topic.State.CLOSED)
        .order_by("-last_activity_at", "-id")
    )


# Read on every socket's connect and at every change of its topics (a burst's first messages
# each open one), on the web process's own threads: compiled once, not at each read.
_OPEN_TOPICS = CompiledQuery(_open_topics)


def topics_for_channel(*, channel_id: str) -> list[Topic]:
    return _OPEN_TOPICS.rows(Topic, channel_id=channel_id)


# Read as every chat message is filed under a topic (`chat_route`): compiled once.
_ACTIVE_TOPICS = CompiledQuery(
    lambda channel_id: _open_topics(channel_id).filter(state=Topic.State.ACTIVE)
)


def active_topics(*, channel_id: str) -> list[Topic]:
    return _ACTIVE_TOPICS.rows(Topic, channel_id=channel_id)


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


# --- a team's chat history (search_history, read_history_entry) -------------------------------

HISTORY_MESSAGES = 200


def _team_topics(team_id: int):
    """Topics a team took part in: one of its sessions served it, or one of its tasks came
    from it. Only routed messages have a topic, so a refused message never shows here."""
    return Topic.objects.filter(Q(sessions__team_id=team_id) | Q(tasks__team_id=team_id))


def _topic_doc(topic: Topic, messages: list[Message]) -> HistoryDoc:
    lines = [f"{m.role}: {m.content}" for m in messages]
    return HistoryDoc(
        kind="topic",
        id=topic.pk,
        date=topic.last_activity_at,
        title=topic.name,
        text="\n".join([topic.description, *lines] if topic.description else lines),
    )


def _last_messages(topic_ids: list[int]) -> dict[int, list[Message]]:
    found: dict[int, list[Message]] = {pk: [] for pk in topic_ids}
    rows = Message.objects.filter(topic_id__in=any_of(topic_ids, of="bigint"))
    for message in rows.order_by("-id").only("topic_id", "role", "content"):
        kept = found[message.topic_id]
        if len(kept) < HISTORY_MESSAGES:
            kept.append(message)
    return {pk: list(reversed(rows)) for pk, rows in found.items()}


def topic_history_docs(
    *, team_id: int, terms: list[str] | None, limit: int = MAX_CANDIDATES
) -> list[HistoryDoc]:
    """The team's topics that mention any term (name, description or a message; all of them
    with `terms=None`, for the vector half), newest first, bounded; each with its last
    messages."""
    rows = _team_topics(team_id)
    if terms is not None:
        rows = rows.filter(any_term(["name", "description", "messages__content"], terms))
    ids = list(
        rows.order_by("-last_activity_at", "-id").values_list("pk", flat=True).distinct()[:limit]
    )
    topics = Topic.objects.in_bulk(ids)
    messages = _last_messages(ids)
    return [_topic_doc(topics[pk], messages[pk]) for pk in ids if pk in topics]


def topic_history_entry(*, team_id: int, topic_id: int) -> dict:
    """One topic the team took part in, scrubbed and capped; any other is not found."""
    topic = _team_topics(team_id).filter(pk=topic_id).distinct().first()
    if topic is None:
        raise NotFound(
            f"topic {topic_id} is not in your team's history (search_history lists it)",
            code="not_found",
        )
    doc = _topic_doc(topic, _last_messages([topic.pk])[topic.pk])
    return {
        "kind": "topic",
        "id": topic.pk,
        "date": doc.date.isoformat(),
        "name": scrub(topic.name),
        "state": topic.state,
        **capped(doc.text, keep_end=True),
    }

"""Every state change of chat: messages, topics and routing, the outbox."""

from .messages import message_admit, message_admit_many, message_record, message_rescrub
from .outbox import (
    channel_group,
    outbox_mark_delivered,
    outbox_put,
    outbox_unmark_delivered,
    topics_changed_notify,
)
from .topics import (
    chat_route,
    message_move,
    topic_activate,
    topic_open,
    topics_idle_stale,
)

__all__ = [
    "channel_group",
    "chat_route",
    "message_admit",
    "message_admit_many",
    "message_move",
    "message_record",
    "message_rescrub",
    "outbox_mark_delivered",
    "outbox_put",
    "outbox_unmark_delivered",
    "topic_activate",
    "topic_open",
    "topics_changed_notify",
    "topics_idle_stale",
]

"""Messages that are not for the main agent: before a turn starts in a topic, the apps that
registered here may take the message (a paused task's answer, an operator's approval) and
say what to reply. The chat app does not know those apps; they register (`tasks.receivers`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .models import Message, Topic
from .services import message_record

logger = logging.getLogger(__name__)

# (channel_id, topic_id, text, sender, operator) -> the reply, or None: not taken.
Interceptor = Callable[..., "str | None"]
_INTERCEPTORS: list[Interceptor] = []


def register_interceptor(func: Interceptor) -> Interceptor:
    if func not in _INTERCEPTORS:
        _INTERCEPTORS.append(func)
    return func


def intercept_inbound(
    *, topic: Topic, message: Message | None, sender_id: str, operator: bool
) -> str | None:
    """The reply to a message an interceptor took (recorded in the topic), or None: the
    message goes to the main agent's turn as usual."""
    if message is None:
        return None
    for func in _INTERCEPTORS:
        reply = func(
            channel_id=topic.channel_id,
            topic_id=topic.pk,
            text=message.content,
            sender=sender_id,
            operator=operator,
        )
        if reply is not None:
            message_record(
                topic=topic,
                sender_id="",
                role=Message.Role.ASSISTANT,
                content=reply,
                in_reply_to=message,
            )
            return reply
    return None

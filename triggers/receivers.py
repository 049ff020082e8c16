"""Where triggers meet the rest of the system: chat messages fire message and keyword
triggers; a finished trigger task feeds the breaker and the overlap state, and its result
reaches the chat when the run asks for it."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from openhive.chat.signals import message_received
from tasks.models import Task
from tasks.signals import finished_receiver

from .clock import CONFIG_ERRORS
from .decisions import message_matches
from .selectors import triggers_listening
from .services import (
    trigger_disable_invalid,
    trigger_fire,
    trigger_record_outcome,
    trigger_run_notify,
)
from .validation import validate_config

logger = logging.getLogger(__name__)


@receiver(message_received, dispatch_uid="triggers-message-received")
def on_message_received(*, message, topic, channel_id: str, sender_id: str, **kwargs) -> None:
    """Runs in the chat path: it must never raise into it."""
    try:
        rows = triggers_listening()
    except Exception:
        logger.exception("message triggers: could not read triggers")
        return
    for trigger in rows:
        try:
            config = validate_config(trigger.type, trigger.config)
        except CONFIG_ERRORS as exc:
            trigger_disable_invalid(trigger=trigger, error=exc, now=message.created_at)
            continue
        try:
            if not message_matches(
                type=trigger.type,
                config=config,
                channel_id=channel_id,
                topic_id=topic.pk,
                text=message.content,
            ):
                continue
            trigger_fire(
                trigger_id=trigger.pk,
                event_key=f"message:{message.pk}",
                context=f"The chat message that fired this trigger:\n{message.content}",
                source_channel=channel_id,
                topic_id=topic.pk,
            )
        except Exception:
            logger.exception("trigger %s: firing on message %s failed", trigger.pk, message.pk)


@finished_receiver(Task.Type.TRIGGER, dispatch_uid="triggers-task-finished")
def on_task_finished(*, task: Task, **kwargs) -> None:
    """Runs in the transaction that records the task's end: the run's notification (if it
    asks for one), then the breaker and overlap bookkeeping."""
    if task.type != Task.Type.TRIGGER or not (task.options or {}).get("trigger_id"):
        return
    trigger_run_notify(task=task)
    trigger_record_outcome(task=task)

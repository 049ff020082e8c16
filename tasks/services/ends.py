"""What a task's end tells beyond its own row: the chat that asked (through the outbox), the
parent team of a task stopped on a budget, and the receivers of `task_finished` -- all in
the transaction that records the end."""

from __future__ import annotations

from openhive.chat.models import OutboxMessage
from openhive.chat.services import outbox_put
from teams.models import TeamMessage
from teams.services import teammessage_send

from ..models import Task
from ..signals import end_observed, task_finished


def ends_alone(task: Task, *, status: str, result: str, stop_reason: str) -> bool:
    """Whether recording this end writes nothing but the task's row: no chat notice, no
    budget escalation, no `task_finished` receiver that acts on its type."""
    if stop_reason == "budget_exceeded" or end_observed(task.type):
        return False
    return status == Task.Status.CANCELLED or not _tells_chat(task, result)


def after_end(task: Task, *, status: str, stop_reason: str) -> None:
    if status != Task.Status.CANCELLED:
        notify_chat(task)
    if stop_reason == "budget_exceeded":
        _tell_parent_of_budget(task)
    task_finished.send(sender=Task, task=task)


def _tell_parent_of_budget(task: Task) -> None:
    """A budget stop is news for whoever asked: the chat hears through the outbox (`notify_chat`);
    otherwise the parent team gets an escalation in its inbox."""
    told_chat = bool(task.source_channel) and task.type != Task.Type.TRIGGER
    parent = task.team.parent
    if told_chat or parent is None or task.type == Task.Type.QUERY:
        return
    teammessage_send(
        sender=task.team,
        recipient=parent,
        content=f"Task #{task.pk} stopped on a budget: {task.result[:1000]}",
        kind=TeamMessage.Kind.ESCALATION,
        reason="budget exceeded",
        correlation_id=f"budget:{task.pk}",
    )


def notify_chat(task: Task) -> None:
    """Tell the chat that asked for this work, through the outbox (same transaction). A
    trigger's run decides for itself whether it notifies: the triggers app handles those on
    `task_finished`."""
    if not _tells_chat(task, task.result):
        return
    team = task.team.name
    kind = OutboxMessage.Kind.RESULT
    if task.type == Task.Type.BOOTSTRAP:
        kind = OutboxMessage.Kind.NOTIFICATION
        if task.status == Task.Status.DONE:
            content = f"[{team}] Team bootstrapped and ready."
        else:
            content = f"[{team}] Team bootstrap failed: {task.result[:500]}"
    else:
        content = f"[{team}] {task.result}"
    outbox_put(
        channel_id=task.source_channel,
        topic_id=task.topic_id,
        team_name=team,
        content=content,
        task_id=task.pk,
        kind=kind,
        task_status=task.status,
    )


def _tells_chat(task: Task, result: str) -> bool:
    """Whether its end puts a message in the outbox (for a status other than cancelled)."""
    if not task.source_channel or task.type == Task.Type.TRIGGER:
        return False
    return task.type == Task.Type.BOOTSTRAP or bool(result.strip())

"""State changes of the durable task queue: enqueue, dispatch, claim with a lease, renew,
finish, cancel and reap. Every transition is a conditional UPDATE, so two processes can never
both move the same task."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from openhive.errors import Conflict, DomainError, NotFound
from vault.scrubbing import scrub

from .models import Task
from .signals import task_finished

PRIORITY_NAMES = {p.label: p.value for p in Task.Priority}
RESULT_LIMIT = 10_000


def priority_from_name(name: str) -> int:
    try:
        return PRIORITY_NAMES[name]
    except KeyError:
        raise DomainError(
            f"priority must be one of {', '.join(PRIORITY_NAMES)}; got {name!r}",
            code="invalid_priority",
        ) from None


def _lease_seconds() -> int:
    return settings.OPENHIVE["LEASE_SECONDS"]


@transaction.atomic
def task_enqueue(
    *,
    team,
    text: str,
    type: str = Task.Type.DELEGATE,
    priority: int = Task.Priority.NORMAL,
    source_channel: str = "",
    topic_id: int | None = None,
    correlation_id: str = "",
    options: dict | None = None,
    created_by: str = "",
) -> Task:
    if not text.strip():
        raise DomainError("task text must not be empty", code="invalid_task")
    return Task.objects.create(
        team=team,
        # A known secret never reaches a task (and so a prompt): teams read theirs from the vault.
        text=scrub(text),
        type=type,
        priority=priority,
        source_channel=source_channel,
        topic_id=topic_id,
        correlation_id=correlation_id,
        options=options or {},
        created_by=created_by,
    )


def tasks_to_dispatch(*, now: datetime, limit: int) -> list[int]:
    """Pending tasks no worker has been handed recently, strictly by priority, then FIFO, and
    no more per team than its free daily-op slots (see tasks.admission)."""
    from .admission import tasks_admissible

    return tasks_admissible(now=now, limit=limit)


def task_mark_dispatched(*, task_id: int, now: datetime) -> bool:
    stale = now - timedelta(seconds=settings.OPENHIVE["REDISPATCH_SECONDS"])
    updated = (
        Task.objects.filter(pk=task_id, status=Task.Status.PENDING)
        .exclude(dispatched_at__gt=stale)
        .update(dispatched_at=now)
    )
    return updated == 1


def dispatched_unclaimed_count(*, now: datetime) -> int:
    stale = now - timedelta(seconds=settings.OPENHIVE["REDISPATCH_SECONDS"])
    return Task.objects.filter(status=Task.Status.PENDING, dispatched_at__gt=stale).count()


def task_claim(*, task_id: int, worker: str, now: datetime | None = None) -> Task | None:
    """Take a pending task for this worker, or None if another worker has it (or it is gone)."""
    now = now or timezone.now()
    claimed = Task.objects.filter(pk=task_id, status=Task.Status.PENDING).update(
        status=Task.Status.RUNNING,
        lease_owner=worker,
        lease_expires_at=now + timedelta(seconds=_lease_seconds()),
        started_at=now,
        attempts=F("attempts") + 1,
    )
    if claimed != 1:
        return None
    return Task.objects.select_related("team", "topic").get(pk=task_id)


def task_renew_lease(*, task_id: int, worker: str, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    renewed = Task.objects.filter(
        pk=task_id, status=Task.Status.RUNNING, lease_owner=worker
    ).update(lease_expires_at=now + timedelta(seconds=_lease_seconds()))
    return renewed == 1


def task_finish(
    *,
    task_id: int,
    worker: str,
    status: str,
    result: str,
    now: datetime | None = None,
    stop_reason: str = "",
) -> Task | None:
    """Record the outcome, if this worker still holds the task. A task cancelled (or reaped)
    meanwhile keeps its status: a late result never overwrites it."""
    now = now or timezone.now()
    with transaction.atomic():
        task = (
            Task.objects.select_for_update()
            .select_related("team")
            .filter(pk=task_id, status=Task.Status.RUNNING, lease_owner=worker)
            .first()
        )
        if task is None:
            return None
        if _bootstrap_retry(task, status, now):
            return task
        if task.type == Task.Type.BOOTSTRAP and status == Task.Status.DONE:
            type(task.team).objects.filter(pk=task.team_id).update(bootstrapped=True)
        _end(task, status=status, result=scrub(result), now=now, stop_reason=stop_reason)
    return task


def _end(task: Task, *, status: str, result: str, now: datetime, stop_reason: str = "") -> None:
    """The one way a claimed or queued task ends (inside the caller's transaction): final
    fields, lease released, the chat told (not for cancellations), then `task_finished`."""
    task.status = status
    task.stop_reason = stop_reason
    task.result = result[:RESULT_LIMIT]
    task.finished_at = now
    if task.started_at:
        task.duration_ms = int((now - task.started_at).total_seconds() * 1000)
    # A cleared lease tells a still-running session that it no longer holds the task, and
    # makes its late result unrecordable.
    task.lease_owner = ""
    task.lease_expires_at = None
    task.save()
    if status != Task.Status.CANCELLED:
        _notify(task)
    task_finished.send(sender=Task, task=task)


def _bootstrap_retry(task: Task, status: str, now: datetime) -> bool:
    """A failed bootstrap goes back to the queue a bounded number of times (never forever)."""
    retries = settings.OPENHIVE["BOOTSTRAP_MAX_RETRIES"]
    if task.type != Task.Type.BOOTSTRAP or status != Task.Status.FAILED:
        return False
    if task.attempts > retries:
        return False
    task.status = Task.Status.PENDING
    task.lease_owner = ""
    task.lease_expires_at = None
    task.dispatched_at = None
    task.save()
    return True


def _notify(task: Task) -> None:
    """Tell the chat that asked for this work, through the outbox (same transaction)."""
    if not task.source_channel:
        return
    from openhive.chat.services import outbox_put

    team = task.team.name
    if task.type == Task.Type.BOOTSTRAP:
        if task.status == Task.Status.DONE:
            content = f"[{team}] Team bootstrapped and ready."
        else:
            content = f"[{team}] Team bootstrap failed: {task.result[:500]}"
    elif task.type == Task.Type.TRIGGER and (task.options or {}).get("trigger_type"):
        from triggers.notify import trigger_notification

        text = trigger_notification(
            trigger_type=task.options["trigger_type"], status=task.status, result=task.result
        )
        if text is None:
            return
        content = f"[{team}] {text}"
    else:
        if not task.result.strip():
            return
        content = f"[{team}] {task.result}"
    outbox_put(
        channel_id=task.source_channel,
        topic_id=task.topic_id,
        team_name=team,
        content=content,
        task_id=task.pk,
    )


@transaction.atomic
def task_cancel(*, task_id: int, reason: str = "cancelled") -> Task:
    task = Task.objects.select_for_update().filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"task {task_id} not found")
    if task.status not in (Task.Status.PENDING, Task.Status.RUNNING):
        raise Conflict(f"task {task_id} is already {task.status}", code="not_cancellable")
    _end(
        task,
        status=Task.Status.CANCELLED,
        result=task.result or reason,
        now=timezone.now(),
        stop_reason=Task.Status.CANCELLED,
    )
    return task


def tasks_reap_expired_leases(*, now: datetime | None = None) -> dict[str, int]:
    """A running task whose lease ran out lost its worker: back to pending, or failed once it
    has used all its attempts."""
    now = now or timezone.now()
    max_attempts = settings.OPENHIVE["TASK_MAX_ATTEMPTS"]
    expired = Task.objects.filter(status=Task.Status.RUNNING, lease_expires_at__lt=now)
    failed_ids = list(expired.filter(attempts__gte=max_attempts).values_list("id", flat=True))
    requeued = expired.filter(attempts__lt=max_attempts).update(
        status=Task.Status.PENDING, lease_owner="", lease_expires_at=None, dispatched_at=None
    )
    failed = 0
    for task_id in failed_ids:
        with transaction.atomic():
            task = (
                Task.objects.select_for_update()
                .select_related("team")
                .filter(pk=task_id, status=Task.Status.RUNNING, lease_expires_at__lt=now)
                .first()
            )
            if task is None:
                continue
            _end(
                task,
                status=Task.Status.FAILED,
                result=f"Error: the worker stopped responding {task.attempts} times",
                now=now,
            )
            failed += 1
    return {"requeued": requeued, "failed": failed}


def tasks_recover_on_startup() -> int:
    """Nothing to do for leases (they expire by themselves); forget stale dispatch marks so
    pending work is handed out at once after a restart."""
    return Task.objects.filter(status=Task.Status.PENDING).update(dispatched_at=None)

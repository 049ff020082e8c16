"""State changes of the durable task queue: enqueue, dispatch, claim with a lease, renew,
finish, cancel and reap. Every transition is a conditional UPDATE, so two processes can never
both move the same task."""

from __future__ import annotations

import contextlib
import os
import socket
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from openhive.core.db import insert_after, reconnecting, statements_in_one_query
from openhive.core.errors import Conflict, DomainError, NotFound
from openhive.core.scrubbing import scrub
from openhive.engine import stopping
from openhive.engine.lineage import current_origin
from openhive.engine.models import Session
from openhive.engine.services import insert_returning, sessions_close_abandoned
from teams.services import team_mark_bootstrapped

from ..models import Task, UserQuestion
from ..timing import defer_delay, lease_until, redispatch_cutoff
from ..wake import WAKE_STATEMENT, wake_workers
from .claims import end_held
from .ends import after_end, ends_alone

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
    # Queued from inside a session (delegate, handoff): remember that session and its trace,
    # so the child's session records its parent and continues the trace.
    options = {**current_origin(), **(options or {})}
    task = Task(
        team=team,
        # A known secret never reaches a task (and so a prompt): teams read theirs from the vault.
        text=scrub(text),
        type=type,
        priority=priority,
        source_channel=source_channel,
        topic_id=topic_id,
        correlation_id=correlation_id,
        options=options,
        created_by=created_by,
    )
    # The announcement and the row in one query, which PostgreSQL runs as one transaction: the
    # workers hear of the task at its commit, as before, in one round trip where BEGIN,
    # NOTIFY, INSERT and COMMIT were four.
    if (
        statements_in_one_query()
        and not transaction.get_connection().in_atomic_block
        and insert_after(WAKE_STATEMENT, task)
    ):
        return task
    # In a caller's transaction, a savepoint: a failed INSERT leaves the caller's usable.
    with transaction.atomic():
        wake_workers()
        insert_returning(task)
    return task


def task_mark_dispatched(*, task_id: int, now: datetime) -> bool:
    updated = (
        Task.objects.filter(pk=task_id, status=Task.Status.PENDING)
        .exclude(dispatched_at__gt=redispatch_cutoff(now))
        .update(dispatched_at=now)
    )
    return updated == 1


def task_release_dispatch(*, task_id: int) -> None:
    """A dispatched task its worker could not admit (team full, org-op): hand it out again."""
    Task.objects.filter(pk=task_id, status=Task.Status.PENDING).update(dispatched_at=None)


@reconnecting
def task_renew_lease(*, task_id: int, worker: str, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    renewed = Task.objects.filter(
        pk=task_id, status=Task.Status.RUNNING, lease_owner=worker
    ).update(lease_expires_at=lease_until(now))
    return renewed == 1


def task_held_for_update(*, task_id: int, worker: str) -> Task | None:
    """The running task `worker` still holds, locked for the caller's transaction; None once
    it does not (cancelled, reaped, handed to another worker)."""
    return (
        Task.objects.select_for_update()
        .select_related("team")
        .filter(pk=task_id, status=Task.Status.RUNNING, lease_owner=worker)
        .first()
    )


@reconnecting
def task_finish(
    *,
    task_id: int,
    worker: str,
    status: str,
    result: str,
    now: datetime | None = None,
    stop_reason: str = "",
    held: Task | None = None,
) -> Task | None:
    """Record the outcome, if this worker still holds the task. A task cancelled (or reaped)
    meanwhile keeps its status: a late result never overwrites it. `held` is the task as the
    worker claimed it: for a plain task the end is then one conditional UPDATE, no re-read."""
    now = now or timezone.now()
    if held is not None and held.pk == task_id and held.type not in REREAD_ON_FINISH:
        return _finish_held(held, worker=worker, status=status, result=result, now=now,
                            stop_reason=stop_reason)  # fmt: skip
    with transaction.atomic(durable=True):
        task = task_held_for_update(task_id=task_id, worker=worker)
        if task is None:
            return None
        if _bootstrap_retry(task, status, now):
            return task
        if task.type == Task.Type.BOOTSTRAP and status == Task.Status.DONE:
            team_mark_bootstrapped(team_id=task.team_id)
        _end(task, status=status, result=scrub(result), now=now, stop_reason=stop_reason)
    return task


# Their end reads fields a session may have changed (a bootstrap's attempts, a trigger run's
# options): those are re-read under a row lock.
REREAD_ON_FINISH = frozenset({Task.Type.BOOTSTRAP, Task.Type.TRIGGER})


def _finish_held(
    task: Task, *, worker: str, status: str, result: str, now: datetime, stop_reason: str
) -> Task | None:
    fields = held_end_fields(task, status=status, result=result, now=now, stop_reason=stop_reason)
    result = fields["result"]
    # (Inside a transaction -- a test's -- the durable block below says what it may do.)
    alone = not transaction.get_connection().in_atomic_block and ends_alone(
        task, status=status, result=result, stop_reason=stop_reason
    )
    # When nothing else is written with this end, its UPDATE commits on its own (one round trip
    # where BEGIN, UPDATE and COMMIT were three), as durable as in a transaction: what follows
    # writes nothing (see `ends_alone`), and a hook put on commit runs at once.
    with contextlib.nullcontext() if alone else transaction.atomic(durable=True):
        if not end_held(task.pk, worker, fields):
            return None
        for name, value in fields.items():
            setattr(task, name, value)
        after_end(task, status=status, stop_reason=stop_reason)
    return task


def held_end_fields(
    task: Task, *, status: str, result: str, now: datetime, stop_reason: str
) -> dict:
    """What a held task's end writes on its row (its result scrubbed, its lease let go)."""
    started = task.started_at
    return {
        "status": status,
        "stop_reason": stop_reason,
        "result": scrub(result)[:RESULT_LIMIT],
        "finished_at": now,
        "duration_ms": int((now - started).total_seconds() * 1000) if started else None,
        "lease_owner": "",
        "lease_expires_at": None,
    }


@transaction.atomic
def task_note_result(*, task: Task, note: str) -> None:
    """Add a paragraph to a finished task's result (what a bootstrap built): the result stays
    one text for every door that shows it."""
    text = f"{task.result.rstrip()}\n\n{note}" if task.result.strip() else note
    task.result = scrub(text)[:RESULT_LIMIT]
    Task.objects.filter(pk=task.pk).update(result=task.result)


def tasks_forget_queued_by(*, session_id: int) -> int:
    """Delete the tasks a session queued. Only for a replay of that session, inside its
    rolled-back transaction: the replay then meets the queue as the session did."""
    return Task.objects.filter(options__parent_session_id=session_id).delete()[0]


def task_defer(
    *,
    task_id: int,
    worker: str,
    reason: str,
    retry_after: float | None = None,
    now: datetime | None = None,
) -> Task | None:
    """Put a running task back in the queue to wait for its model provider, if this worker
    still holds it and it has been put back fewer than PROVIDER_REQUEUE_MAX times; else None
    (the caller fails it). The queue hands it out again only after `run_after`."""
    now = now or timezone.now()
    with transaction.atomic(durable=True):
        task = task_held_for_update(task_id=task_id, worker=worker)
        if task is None or task.defer_count >= settings.OPENHIVE["PROVIDER_REQUEUE_MAX"]:
            return None
        delay = defer_delay(task.defer_count, retry_after)
        task.defer_count += 1
        task.run_after = now + timedelta(seconds=delay)
        task.defer_reason = scrub(
            f"{reason[:1500]} -- put back in the queue ({task.defer_count} of "
            f"{settings.OPENHIVE['PROVIDER_REQUEUE_MAX']}); next try after "
            f"{task.run_after:%Y-%m-%d %H:%M:%S} UTC"
        )
        task.status = Task.Status.PENDING
        task.lease_owner = ""
        task.lease_expires_at = None
        task.dispatched_at = None
        task.save()
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
    after_end(task, status=status, stop_reason=stop_reason)


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


@transaction.atomic
def task_cancel(*, task_id: int, reason: str = "cancelled") -> Task:
    task = Task.objects.select_for_update().filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"task {task_id} not found")
    waiting = (Task.Status.WAITING_FOR_USER, Task.Status.WAITING_FOR_APPROVAL)
    if task.status not in (Task.Status.PENDING, Task.Status.RUNNING, *waiting):
        raise Conflict(f"task {task_id} is already {task.status}", code="not_cancellable")
    # Whatever it waited for is closed with it.
    UserQuestion.objects.filter(task_id=task_id, state=UserQuestion.State.PENDING).update(
        state=UserQuestion.State.CLOSED, decided_at=timezone.now()
    )
    _end(
        task,
        status=Task.Status.CANCELLED,
        result=task.result or reason,
        now=timezone.now(),
        stop_reason=Task.Status.CANCELLED,
    )
    # A session of this process running the task reads its flag before its next model call:
    # now (this connection sees the change) and once it is committed (every connection does).
    stopping.stop_requested()
    transaction.on_commit(stopping.stop_requested)
    return task


def tasks_reap_expired_leases(*, now: datetime | None = None) -> dict[str, int]:
    """A running task whose lease ran out lost its worker: back to pending, or failed once it
    has used all its attempts."""
    now = now or timezone.now()
    max_attempts = settings.OPENHIVE["TASK_MAX_ATTEMPTS"]
    expired = Task.objects.filter(status=Task.Status.RUNNING, lease_expires_at__lt=now)
    failed_ids = list(expired.filter(attempts__gte=max_attempts).values_list("id", flat=True))
    requeued_ids = list(expired.filter(attempts__lt=max_attempts).values_list("id", flat=True))
    requeued = Task.objects.filter(
        pk__in=requeued_ids, status=Task.Status.RUNNING, lease_expires_at__lt=now
    ).update(status=Task.Status.PENDING, lease_owner="", lease_expires_at=None, dispatched_at=None)
    sessions_close_abandoned(
        task_ids=requeued_ids + failed_ids,
        stop_reason=Session.StopReason.WORKER_DIED,
        error="the worker running this session stopped responding (its lease expired)",
    )
    if requeued_ids or failed_ids:
        stopping.stop_requested()  # a session here that still runs one of them must stop
    failed = 0
    for task_id in failed_ids:
        with transaction.atomic(durable=True):
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


def tasks_release_dead_local_workers(*, host: str | None = None) -> list[int]:
    """Hand back the tasks that workers on this host were running when they were stopped or
    killed: pending again at once (not after the lease expires), the attempt not counted (the
    task did not fail; its process was taken away), their sessions closed as interrupted.
    A lease owner is `host:pid:thread`; only owners whose process no longer exists count."""
    host = host or socket.gethostname()
    dead: list[int] = []
    for task_id, owner in Task.objects.filter(
        status=Task.Status.RUNNING, lease_owner__startswith=f"{host}:"
    ).values_list("id", "lease_owner"):
        pid = owner.split(":")[1] if owner.count(":") >= 2 else ""
        if pid.isdigit() and not _process_alive(int(pid)):
            dead.append(task_id)
    note = "the worker was stopped while this session ran; the task was handed back"
    return [task_id for task_id in dead if task_hand_back(task_id=task_id, reason=note)]


@reconnecting
def task_hand_back(*, task_id: int, reason: str, worker: str | None = None) -> bool:
    """Put a running task back in the queue because its run was taken away by the platform
    (a stop, a dead worker, a lost database), not because it failed: pending at once, the
    attempt not counted, its open session closed as interrupted with `reason`. With `worker`,
    only if that worker still holds it."""
    with transaction.atomic(durable=True):
        held = Task.objects.filter(pk=task_id, status=Task.Status.RUNNING)
        if worker is not None:
            held = held.filter(lease_owner=worker)
        moved = held.update(
            status=Task.Status.PENDING,
            lease_owner="",
            lease_expires_at=None,
            dispatched_at=None,
            started_at=None,
            attempts=Greatest(F("attempts") - 1, 0),
        )
        if moved:
            wake_workers()
            sessions_close_abandoned(
                task_ids=[task_id], stop_reason=Session.StopReason.INTERRUPTED, error=reason
            )
    return bool(moved)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def tasks_recover_on_startup() -> int:
    """Nothing to do for leases (they expire by themselves); forget stale dispatch marks so
    pending work is handed out at once after a restart."""
    return Task.objects.filter(status=Task.Status.PENDING).update(dispatched_at=None)


def task_mark_stall_escalated(*, task_id: int) -> bool:
    """Flag a stalled task as escalated, once: False if it is gone or already flagged (two
    leaders in a hand-over never escalate one task twice)."""
    fresh = Task.objects.select_for_update().filter(pk=task_id).first()
    if fresh is None or fresh.options.get("stall_escalated"):
        return False
    fresh.options = {**fresh.options, "stall_escalated": True}
    fresh.save(update_fields=["options"])
    return True

"""The durable task queue: order, exclusive claims with leases, finish, cancel and the reaper."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.conf import settings

from openhive.chat.models import OutboxMessage
from openhive.core.errors import DomainError, NotFound
from openhive.engine.models import Session
from tasks.models import Task
from tasks.selectors import dispatched_unclaimed_count, tasks_admissible
from tasks.services import (
    RESULT_LIMIT,
    priority_from_name,
    task_cancel,
    task_enqueue,
    task_finish,
    task_mark_dispatched,
    task_renew_lease,
    tasks_reap_expired_leases,
    tasks_recover_on_startup,
    tasks_release_dead_local_workers,
)
from teams.models import Team
from tests.factories import TeamFactory, claim

pytestmark = pytest.mark.django_db

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
P = Task.Priority


@pytest.fixture
def clock():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.fixture
def ops(main_team):
    return TeamFactory(name="ops", parent=main_team)


def lease() -> timedelta:
    return timedelta(seconds=settings.OPENHIVE["LEASE_SECONDS"])


def enqueue_at(team, when: datetime, text: str, priority: int = P.NORMAL, **kwargs) -> Task:
    with time_machine.travel(when, tick=False):
        return task_enqueue(team=team, text=text, priority=priority, **kwargs)


# --- enqueue ----------------------------------------------------------------------------------


def test_enqueue_creates_a_pending_normal_delegate_task(ops, clock):
    task = task_enqueue(team=ops, text="check the logs", created_by="main")
    task.refresh_from_db()
    assert (task.status, task.priority, task.type) == ("pending", P.NORMAL, "delegate")
    assert task.created_at == T0 and task.attempts == 0 and task.created_by == "main"
    assert task.priority_name == "normal"


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_task_text_is_refused(ops, text):
    with pytest.raises(DomainError, match="must not be empty"):
        task_enqueue(team=ops, text=text)
    assert not Task.objects.exists()


def test_priority_names_map_to_values():
    assert [priority_from_name(n) for n in ("critical", "high", "normal", "low")] == [0, 1, 2, 3]
    with pytest.raises(DomainError, match="priority must be one of critical, high, normal, low"):
        priority_from_name("urgent")


# --- dispatch order ---------------------------------------------------------------------------


def test_dispatch_order_is_strictly_priority_then_oldest_first(ops, clock):
    s = timedelta(seconds=1)
    low = enqueue_at(ops, T0, "low", P.LOW)
    normal_old = enqueue_at(ops, T0 + s, "normal old", P.NORMAL)
    critical_new = enqueue_at(ops, T0 + 5 * s, "critical new", P.CRITICAL)
    high = enqueue_at(ops, T0 + 3 * s, "high", P.HIGH)
    normal_new = enqueue_at(ops, T0 + 4 * s, "normal new", P.NORMAL)
    critical_old = enqueue_at(ops, T0 + 2 * s, "critical old", P.CRITICAL)
    expected = [critical_old, critical_new, high, normal_old, normal_new, low]
    # One team, default cap 5: the sixth waits for a free slot rather than being handed out.
    assert tasks_admissible(now=T0 + 10 * s, limit=10) == [t.pk for t in expected][:5]


def test_equal_priority_and_time_fall_back_to_insertion_order(ops, clock):
    tasks = [task_enqueue(team=ops, text=f"t{i}") for i in range(4)]
    assert tasks_admissible(now=T0, limit=10) == [t.pk for t in tasks]


def test_dispatch_respects_the_limit(ops, clock):
    tasks = [task_enqueue(team=ops, text=f"t{i}") for i in range(5)]
    assert tasks_admissible(now=T0, limit=2) == [tasks[0].pk, tasks[1].pk]


def test_only_pending_tasks_are_dispatched(ops, clock):
    pending = task_enqueue(team=ops, text="pending")
    for status in ("running", "done", "failed", "cancelled"):
        Task.objects.filter(pk=task_enqueue(team=ops, text=status).pk).update(status=status)
    assert tasks_admissible(now=T0, limit=10) == [pending.pk]


def test_a_dispatched_task_is_not_handed_out_again_until_the_redispatch_delay(ops, clock):
    task = task_enqueue(team=ops, text="x")
    assert task_mark_dispatched(task_id=task.pk, now=T0) is True
    assert task_mark_dispatched(task_id=task.pk, now=T0) is False
    assert tasks_admissible(now=T0, limit=10) == []
    assert dispatched_unclaimed_count(now=T0) == 1
    later = T0 + timedelta(seconds=settings.OPENHIVE["REDISPATCH_SECONDS"] + 1)
    assert tasks_admissible(now=later, limit=10) == [task.pk]
    assert dispatched_unclaimed_count(now=later) == 0
    assert task_mark_dispatched(task_id=task.pk, now=later) is True


def test_startup_recovery_forgets_dispatch_marks(ops, clock):
    task = task_enqueue(team=ops, text="x")
    task_mark_dispatched(task_id=task.pk, now=T0)
    assert tasks_recover_on_startup() == 1
    assert tasks_admissible(now=T0, limit=10) == [task.pk]


# --- claim, renew, finish ---------------------------------------------------------------------


def test_claim_takes_the_task_with_a_lease(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claimed = claim(task_id=task.pk, worker="w1")
    assert claimed is not None and claimed.pk == task.pk
    assert claimed.status == "running" and claimed.lease_owner == "w1"
    assert claimed.lease_expires_at == T0 + lease()
    assert claimed.started_at == T0 and claimed.attempts == 1
    assert claimed.team == ops  # loaded with the task


def test_claim_is_exclusive(ops, clock):
    task = task_enqueue(team=ops, text="x")
    assert claim(task_id=task.pk, worker="w1") is not None
    assert claim(task_id=task.pk, worker="w2") is None
    task.refresh_from_db()
    assert task.lease_owner == "w1" and task.attempts == 1


def test_claiming_a_missing_or_finished_task_returns_none(ops, clock):
    assert claim(task_id=999_999, worker="w1") is None
    task = task_enqueue(team=ops, text="x")
    task_cancel(task_id=task.pk)
    assert claim(task_id=task.pk, worker="w1") is None


def test_lease_renewal_extends_only_for_the_holder(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    later = T0 + timedelta(seconds=30)
    assert task_renew_lease(task_id=task.pk, worker="w2", now=later) is False
    assert task_renew_lease(task_id=task.pk, worker="w1", now=later) is True
    task.refresh_from_db()
    assert task.lease_expires_at == later + lease()


def test_finish_records_the_outcome_and_releases_the_lease(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    done = task_finish(
        task_id=task.pk,
        worker="w1",
        status="done",
        result="all good",
        now=T0 + timedelta(seconds=2.5),
    )
    assert done is not None
    done.refresh_from_db()
    assert (done.status, done.result, done.duration_ms) == ("done", "all good", 2500)
    assert done.finished_at == T0 + timedelta(seconds=2.5)
    assert done.lease_owner == "" and done.lease_expires_at is None
    assert task_renew_lease(task_id=task.pk, worker="w1") is False


def test_finish_by_another_worker_changes_nothing(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    assert task_finish(task_id=task.pk, worker="w2", status="done", result="hijack") is None
    task.refresh_from_db()
    assert task.status == "running" and task.result == ""


def test_a_long_result_is_truncated(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    task_finish(task_id=task.pk, worker="w1", status="done", result="x" * (RESULT_LIMIT + 50))
    task.refresh_from_db()
    assert len(task.result) == RESULT_LIMIT


# --- cancel -----------------------------------------------------------------------------------


def test_a_finished_result_never_overwrites_cancelled(ops, clock):
    task = task_enqueue(team=ops, text="x", source_channel="web:alice")
    claim(task_id=task.pk, worker="w1")
    task_cancel(task_id=task.pk, reason="user changed their mind")
    assert task_finish(task_id=task.pk, worker="w1", status="done", result="late") is None
    task.refresh_from_db()
    assert task.status == "cancelled" and task.result == "user changed their mind"
    assert not OutboxMessage.objects.exists()


def test_cancel_a_pending_task(ops, clock):
    task = task_enqueue(team=ops, text="x")
    cancelled = task_cancel(task_id=task.pk)
    assert cancelled.status == "cancelled" and cancelled.result == "cancelled"
    assert cancelled.finished_at == T0
    assert tasks_admissible(now=T0, limit=10) == []


def test_a_finished_task_cannot_be_cancelled(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    task_finish(task_id=task.pk, worker="w1", status="done", result="ok")
    with pytest.raises(DomainError, match="already done") as err:
        task_cancel(task_id=task.pk)
    assert err.value.code == "not_cancellable"
    task.refresh_from_db()
    assert task.status == "done" and task.result == "ok"


def test_cancelling_an_unknown_task_is_not_found():
    with pytest.raises(NotFound):
        task_cancel(task_id=424242)


# --- the lease reaper -------------------------------------------------------------------------


def test_reaper_requeues_a_task_whose_lease_expired(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    assert tasks_reap_expired_leases(now=T0 + lease() - timedelta(seconds=1)) == {
        "requeued": 0,
        "failed": 0,
    }
    clock.move_to(T0 + lease() + timedelta(seconds=1))
    assert tasks_reap_expired_leases() == {"requeued": 1, "failed": 0}
    task.refresh_from_db()
    assert task.status == "pending" and task.lease_owner == "" and task.lease_expires_at is None
    assert task.attempts == 1
    assert tasks_admissible(now=T0 + lease() * 2, limit=10) == [task.pk]


def test_reaper_leaves_a_renewed_task_alone(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    half = T0 + lease() / 2
    task_renew_lease(task_id=task.pk, worker="w1", now=half)
    assert tasks_reap_expired_leases(now=T0 + lease() + timedelta(seconds=1))["requeued"] == 0
    task.refresh_from_db()
    assert task.status == "running" and task.lease_owner == "w1"


def test_reaper_fails_a_task_after_max_attempts(ops, clock):
    max_attempts = settings.OPENHIVE["TASK_MAX_ATTEMPTS"]
    task = task_enqueue(team=ops, text="x", source_channel="web:alice")
    now = T0
    for attempt in range(1, max_attempts + 1):
        assert claim(task_id=task.pk, worker=f"w{attempt}", now=now) is not None
        now += lease() + timedelta(seconds=1)
        outcome = tasks_reap_expired_leases(now=now)
        task.refresh_from_db()
        if attempt < max_attempts:
            assert outcome == {"requeued": 1, "failed": 0}
            assert task.status == "pending"
    assert outcome == {"requeued": 0, "failed": 1}
    assert task.status == "failed" and task.attempts == max_attempts
    assert task.result == f"Error: the worker stopped responding {max_attempts} times"
    assert task.finished_at == now and task.lease_owner == ""
    note = OutboxMessage.objects.get()
    assert note.channel_id == "web:alice" and note.task_id == task.pk
    assert note.content == f"[ops] {task.result}"


def test_reaper_respects_the_configured_max_attempts(ops, clock, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "TASK_MAX_ATTEMPTS": 1}
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    assert tasks_reap_expired_leases(now=T0 + lease() * 2) == {"requeued": 0, "failed": 1}
    task.refresh_from_db()
    assert task.status == "failed"


def _open_session(task: Task) -> Session:
    return Session.objects.create(team=task.team, task=task)


def test_reaper_closes_the_sessions_a_dead_worker_left_open(ops, clock):
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="w1")
    session = _open_session(task)
    finished = Session.objects.create(team=ops, task=task, stop_reason="completed", finished_at=T0)
    clock.move_to(T0 + lease() + timedelta(seconds=1))
    tasks_reap_expired_leases()
    session.refresh_from_db()
    assert session.stop_reason == "worker_died" and session.finished_at is not None
    assert "stopped responding" in session.error
    finished.refresh_from_db()
    assert finished.stop_reason == "completed"


def _dead_pid() -> int:
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_tasks_of_dead_local_workers_go_back_at_once_without_costing_an_attempt(ops, clock):
    import os
    import socket

    host = socket.gethostname()
    dead = task_enqueue(team=ops, text="dead")
    claim(task_id=dead.pk, worker=f"{host}:{_dead_pid()}:1")
    session = _open_session(dead)
    alive = task_enqueue(team=ops, text="alive")
    claim(task_id=alive.pk, worker=f"{host}:{os.getpid()}:1")
    elsewhere = task_enqueue(team=ops, text="elsewhere")
    claim(task_id=elsewhere.pk, worker=f"other-host:{_dead_pid()}:1")

    assert tasks_release_dead_local_workers() == [dead.pk]
    dead.refresh_from_db()
    assert dead.status == "pending" and dead.lease_owner == "" and dead.attempts == 0
    session.refresh_from_db()
    assert session.stop_reason == "interrupted" and session.finished_at is not None
    assert Task.objects.get(pk=alive.pk).status == "running"
    assert Task.objects.get(pk=elsewhere.pk).status == "running"


# --- results reach the chat through the outbox ------------------------------------------------


def finish(task: Task, status: str = "done", result: str = "") -> Task | None:
    claim(task_id=task.pk, worker="w1")
    return task_finish(task_id=task.pk, worker="w1", status=status, result=result)


def test_finishing_a_bootstrap_marks_the_team_ready_and_tells_the_chat(ops, clock):
    from openhive.chat.models import Topic

    topic = Topic.objects.create(channel_id="web:alice", name="General")
    task = task_enqueue(
        team=ops,
        text="bootstrap",
        type=Task.Type.BOOTSTRAP,
        priority=P.CRITICAL,
        source_channel="web:alice",
        topic_id=topic.pk,
    )
    finish(task, result="Ready to deploy.")
    assert Team.objects.get(pk=ops.pk).bootstrapped is True
    note = OutboxMessage.objects.get()
    assert note.content == "[ops] Team bootstrapped and ready."
    assert (note.channel_id, note.topic_id, note.task_id) == ("web:alice", topic.pk, task.pk)
    assert note.team_name == "ops" and note.kind == "notification" and note.delivered_at is None


def test_a_failed_bootstrap_is_retried_a_bounded_number_of_times_then_says_so(ops, clock, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "BOOTSTRAP_MAX_RETRIES": 2}
    task = task_enqueue(
        team=ops, text="bootstrap", type=Task.Type.BOOTSTRAP, source_channel="web:alice"
    )
    for attempt in (1, 2):
        finish(task, status="failed", result="Error: no provider")
        task.refresh_from_db()
        assert (task.status, task.attempts, task.lease_owner) == ("pending", attempt, "")
        assert not OutboxMessage.objects.exists()
    finish(task, status="failed", result="Error: no provider")
    task.refresh_from_db()
    assert (task.status, task.attempts) == ("failed", 3)
    assert Team.objects.get(pk=ops.pk).bootstrapped is False
    assert OutboxMessage.objects.get().content == "[ops] Team bootstrap failed: Error: no provider"


def test_a_delegated_result_goes_to_the_chat_that_asked(ops, clock):
    task = task_enqueue(team=ops, text="check", source_channel="web:alice")
    finish(task, result="Disk usage is 40%.")
    note = OutboxMessage.objects.get()
    assert note.content == "[ops] Disk usage is 40%." and note.channel_id == "web:alice"


def test_a_task_without_source_channel_writes_no_outbox_row(ops, clock):
    finish(task_enqueue(team=ops, text="check"), result="Disk usage is 40%.")
    finish(task_enqueue(team=ops, text="boot", type=Task.Type.BOOTSTRAP), result="ok")
    assert not OutboxMessage.objects.exists()
    assert Team.objects.get(pk=ops.pk).bootstrapped is True


def test_an_empty_delegated_result_writes_no_outbox_row(ops, clock):
    finish(task_enqueue(team=ops, text="check", source_channel="web:alice"), result="  ")
    assert not OutboxMessage.objects.exists()

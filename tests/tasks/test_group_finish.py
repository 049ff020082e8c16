"""Group commit of task ends: a pull worker's finisher writes the ends its runners hand over
together, and nobody hears of an end before it is committed."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from tasks.finisher import Finisher
from tasks.models import Task
from tasks.pull import PullWorker
from tasks.runner import record_end
from tasks.services import task_cancel, task_enqueue, tasks_reap_expired_leases
from tasks.services.claims import batch_owner, task_claim_batch
from tasks.services.finishes import HeldEnd, tasks_finish_held
from tasks.signals import task_finished
from tests.factories import set_cap
from tests.tasks.committed import committed_status


def end_of(task: Task, owner: str, result: str = "ok") -> HeldEnd:
    return HeldEnd(task, owner, Task.Status.DONE, result, "", timezone.now())


def hand_over(finisher: Finisher, end: HeldEnd) -> Future:
    done: Future = Future()
    finisher._ends.put((end, done))
    return done


@pytest.mark.django_db
def test_a_batch_of_ends_is_one_transaction_with_one_update_on_postgresql(
    teams, django_assert_max_num_queries
):
    for i in range(4):
        task_enqueue(team=teams[i % 3], text=f"t{i}")
    owner = batch_owner()
    held = task_claim_batch(worker=owner, limit=4)
    # Its transaction (a savepoint in the test's) around one UPDATE; SQLite: one per end.
    most = 3 if connection.vendor == "postgresql" else 2 + len(held)
    with django_assert_max_num_queries(most):
        finished = tasks_finish_held([end_of(task, owner, f"r{task.pk}") for task in held])
    assert finished == held
    for row in Task.objects.all():
        assert row.status == "done" and row.result == f"r{row.pk}" and row.lease_owner == ""
        assert row.finished_at is not None and row.duration_ms is not None


@pytest.mark.django_db
def test_a_batch_writes_each_end_exactly_as_given(teams):
    for i in range(2):
        task_enqueue(team=teams[i], text=f"t{i}")
    owner = batch_owner()
    first, second = task_claim_batch(worker=owner, limit=2)
    awkward = "quotes ' \" {json} [1, 2] \\ back, tab\t, new\nline, ünïcödé 🐝, " + "x" * 5000
    when = (timezone.now() + timedelta(seconds=3)).replace(microsecond=123456)
    ends = [
        HeldEnd(first, owner, Task.Status.FAILED, awkward, "max_turns", when),
        HeldEnd(second, owner, Task.Status.DONE, "", "", when + timedelta(seconds=2)),
    ]
    assert tasks_finish_held(ends) == [first, second]
    row = Task.objects.get(pk=first.pk)
    assert (row.status, row.result, row.stop_reason) == ("failed", awkward, "max_turns")
    assert row.finished_at == when
    assert row.duration_ms == int((when - first.started_at).total_seconds() * 1000)
    other = Task.objects.get(pk=second.pk)
    later = when + timedelta(seconds=2)
    assert (other.status, other.result, other.finished_at) == ("done", "", later)


@pytest.mark.django_db
def test_an_end_in_a_batch_for_a_task_no_longer_held_changes_nothing(teams):
    ops, _db, _web = teams
    task_enqueue(team=ops, text="kept")
    task_enqueue(team=ops, text="cancelled")
    owner = batch_owner()
    kept, cancelled = task_claim_batch(worker=owner, limit=2)
    task_cancel(task_id=cancelled.pk)
    assert tasks_finish_held([end_of(kept, owner), end_of(cancelled, owner)]) == [kept, None]
    assert Task.objects.get(pk=kept.pk).status == "done"
    assert Task.objects.get(pk=cancelled.pk).status == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_ends_handed_over_meanwhile_are_written_in_one_batch(teams):
    for i in range(5):
        task_enqueue(team=teams[i % 3], text=f"t{i}")
    owner = batch_owner()
    held = task_claim_batch(worker=owner, limit=5)
    finisher = Finisher(group=True)
    waiting = [hand_over(finisher, end_of(task, owner)) for task in held]
    finisher.start()
    assert [done.result(timeout=30) for done in waiting] == held
    finisher.stop()
    assert finisher.batches == 1
    assert Counter(Task.objects.values_list("status", flat=True)) == {"done": 5}


@pytest.mark.django_db(transaction=True)
def test_a_worker_dying_before_its_ends_are_written_leaves_them_to_the_reaper(teams):
    ops, _db, _web = teams
    task = task_enqueue(team=ops, text="work")
    owner = batch_owner()
    [held] = task_claim_batch(worker=owner, limit=1)
    dead = Finisher(group=True)  # never writes: the process died with the end handed over
    late = hand_over(dead, end_of(held, owner, "lost"))
    assert committed_status(task.pk) == "running"  # not done: nothing was committed

    later = timezone.now() + timedelta(hours=1)
    assert tasks_reap_expired_leases(now=later) == {"requeued": 1, "failed": 0}
    again_owner = batch_owner()
    [again] = task_claim_batch(worker=again_owner, limit=1)
    # Were the dead worker's end written after all, it is refused: the task is held anew.
    dead.start()
    dead.stop()
    assert late.result(timeout=30) is None
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.lease_owner, row.attempts) == ("running", again_owner, 2)
    assert again.pk == task.pk


@pytest.mark.django_db(transaction=True)
def test_an_end_is_signalled_inside_its_commit_and_reported_only_after_it(teams):
    events: list[tuple[str, int]] = []

    def on_finished(*, task: Task, **kwargs) -> None:
        events.append(("signalled", task.pk))
        transaction.on_commit(lambda: events.append(("committed", task.pk)))

    def execute(task: Task, owner: str) -> str:
        finished = record_end(task, owner, status="done", result="ok")
        assert finished is not None
        assert committed_status(task.pk) == "done"
        events.append(("returned", task.pk))
        return "done"

    tasks = [task_enqueue(team=teams[i % 3], text=f"t{i}") for i in range(9)]
    task_finished.connect(on_finished, dispatch_uid="test-order")
    pull = PullWorker(threads=3, execute=execute, poll=0.05, group_ends=True)
    try:
        pull.start()
        for _ in range(600):
            if Task.objects.filter(status="done").count() == 9:
                break
            threading.Event().wait(0.05)
    finally:
        pull.stop.set()
        pull.join()
        task_finished.disconnect(dispatch_uid="test-order")
    for task in tasks:
        mine = [kind for kind, pk in events if pk == task.pk]
        assert mine == ["signalled", "committed", "returned"]
    assert pull.busy == 0 and pull._waiting == 0  # every slot given up early came back once


@pytest.mark.django_db(transaction=True)
def test_one_bad_end_does_not_fail_the_others_written_with_it(teams):
    for i in range(3):
        task_enqueue(team=teams[i], text=f"t{i}")
    owner = batch_owner()
    held = task_claim_batch(worker=owner, limit=3)
    bad = held[1]

    def explode(*, task: Task, **kwargs) -> None:
        if task.pk == bad.pk:
            raise RuntimeError("receiver failed")

    task_finished.connect(explode, dispatch_uid="test-explode")
    finisher = Finisher(group=True)
    try:
        waiting = [hand_over(finisher, end_of(task, owner)) for task in held]
        finisher.start()
        with pytest.raises(RuntimeError):
            waiting[1].result(timeout=30)
        assert waiting[0].result(timeout=30) == held[0]
        assert waiting[2].result(timeout=30) == held[2]
    finally:
        finisher.stop()
        task_finished.disconnect(dispatch_uid="test-explode")
    statuses = dict(Task.objects.values_list("pk", "status"))
    # The bad end rolled back alone: its task is still held, for its lease to run out.
    assert statuses == {held[0].pk: "done", bad.pk: "running", held[2].pk: "done"}


@pytest.mark.django_db(transaction=True)
def test_concurrent_pull_workers_with_finishers_run_every_task_exactly_once(teams):
    for team in teams:
        set_cap(team.name, 50)
    tasks = [task_enqueue(team=teams[i % 3], text=f"t{i}") for i in range(90)]
    ran: list[int] = []

    def execute(task: Task, owner: str) -> str:
        ran.append(task.pk)
        return "done" if record_end(task, owner, status="done", result="ok") else "lost"

    workers = [PullWorker(threads=4, execute=execute, poll=0.02, group_ends=True) for _ in range(3)]
    try:
        for pull in workers:
            pull.start()
        for _ in range(1200):
            if Task.objects.filter(status="done").count() == 90:
                break
            threading.Event().wait(0.05)
    finally:
        for pull in workers:
            pull.stop.set()
        for pull in workers:
            pull.join()
    assert sorted(ran) == sorted(t.pk for t in tasks)
    assert Counter(Task.objects.values_list("status", "attempts")) == {("done", 1): 90}

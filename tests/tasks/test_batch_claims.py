"""Batched claims and the pull worker: priority order, per-team caps and the org-op mutex hold
within a batch; concurrent claimers never take a task twice; unstarted claims go back on
stop; leases of batched claims still expire and are reaped."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from tasks.models import OrgOpLock, Task
from tasks.pull import PullWorker
from tasks.runner import run_next_task
from tasks.services import task_cancel, task_enqueue, task_finish, tasks_reap_expired_leases
from tasks.services.claims import batch_owner, task_claim_batch
from tests.factories import set_cap

P = Task.Priority


def statuses(tasks) -> list[str]:
    return [Task.objects.get(pk=t.pk).status for t in tasks]


@pytest.mark.django_db
def test_a_batch_takes_the_most_urgent_tasks_of_all_teams_in_priority_then_fifo_order(teams):
    ops, db, web = teams
    low = task_enqueue(team=ops, text="low", priority=P.LOW)
    normal_db = task_enqueue(team=db, text="normal db")
    critical = task_enqueue(team=web, text="critical", priority=P.CRITICAL)
    normal_ops = task_enqueue(team=ops, text="normal ops")
    high = task_enqueue(team=db, text="high", priority=P.HIGH)

    batch = task_claim_batch(worker="w", limit=4)

    assert [t.pk for t in batch] == [critical.pk, high.pk, normal_db.pk, normal_ops.pk]
    assert all(t.status == "running" and t.lease_owner == "w" and t.attempts == 1 for t in batch)
    assert batch[0].team.name == "web"  # loaded with the batch: no read per task
    assert statuses([low]) == ["pending"]
    assert [t.pk for t in task_claim_batch(worker="w2", limit=4)] == [low.pk]
    assert task_claim_batch(worker="w3", limit=4) == []


@pytest.mark.django_db
def test_a_batch_never_exceeds_a_teams_free_slots(teams):
    ops, db, _web = teams
    set_cap("ops", 2)
    already = task_enqueue(team=ops, text="already running")
    [held] = task_claim_batch(worker="w0", limit=1)
    assert held.pk == already.pk
    ops_tasks = [task_enqueue(team=ops, text=f"ops {i}", priority=P.HIGH) for i in range(4)]
    db_tasks = [task_enqueue(team=db, text=f"db {i}") for i in range(2)]

    batch = task_claim_batch(worker="w", limit=10)

    assert [t.pk for t in batch] == [ops_tasks[0].pk, db_tasks[0].pk, db_tasks[1].pk]
    assert Task.objects.filter(team=ops, status="running").count() == 2
    assert task_claim_batch(worker="w", limit=10) == []


@pytest.mark.django_db
def test_no_task_of_a_team_under_an_org_op_is_claimed(teams):
    ops, db, _web = teams
    now = timezone.now()
    OrgOpLock.objects.create(
        team=ops, holder="h", acquired_at=now, expires_at=now + timedelta(minutes=5)
    )
    blocked = task_enqueue(team=ops, text="waits", priority=P.CRITICAL)
    free = task_enqueue(team=db, text="runs")

    assert [t.pk for t in task_claim_batch(worker="w", limit=5)] == [free.pk]
    assert statuses([blocked]) == ["pending"]
    OrgOpLock.objects.all().delete()
    assert [t.pk for t in task_claim_batch(worker="w", limit=5)] == [blocked.pk]


@pytest.mark.django_db
def test_only_ready_pending_tasks_are_claimable(teams):
    ops, _db, _web = teams
    later = task_enqueue(team=ops, text="provider down")
    Task.objects.filter(pk=later.pk).update(run_after=timezone.now() + timedelta(minutes=5))
    cancelled = task_enqueue(team=ops, text="cancelled")
    task_cancel(task_id=cancelled.pk)
    assert task_claim_batch(worker="w", limit=5) == []


@pytest.mark.django_db
def test_a_finish_by_a_worker_that_no_longer_holds_the_task_changes_nothing(teams):
    ops, _db, _web = teams
    task_enqueue(team=ops, text="work")
    [held] = task_claim_batch(worker="w1", limit=1)
    task_cancel(task_id=held.pk)
    assert task_finish(task_id=held.pk, worker="w1", status="done", result="x", held=held) is None
    assert Task.objects.get(pk=held.pk).status == "cancelled"


@pytest.mark.django_db
def test_a_held_finish_records_the_end_in_one_update(teams, django_assert_max_num_queries):
    ops, _db, _web = teams
    task_enqueue(team=ops, text="work")
    [held] = task_claim_batch(worker="w1", limit=1)
    with django_assert_max_num_queries(3):  # savepoint-free: BEGIN/UPDATE/COMMIT at most
        done = task_finish(task_id=held.pk, worker="w1", status="done", result="ok", held=held)
    row = Task.objects.get(pk=held.pk)
    assert done is held and row.status == "done" and row.result == "ok"
    assert row.lease_owner == "" and row.finished_at is not None and row.duration_ms is not None


@pytest.mark.django_db
def test_leases_of_batched_claims_still_expire_and_are_reaped(teams):
    ops, _db, _web = teams
    tasks = [task_enqueue(team=ops, text=f"t{i}") for i in range(3)]
    owner = batch_owner()
    assert len(task_claim_batch(worker=owner, limit=3)) == 3
    later = timezone.now() + timedelta(hours=1)
    assert tasks_reap_expired_leases(now=later) == {"requeued": 3, "failed": 0}
    assert statuses(tasks) == ["pending"] * 3
    # The old owner's late finish is refused; a new claim has a new owner.
    again = task_claim_batch(worker=batch_owner(), limit=3)
    assert {t.lease_owner for t in again} != {owner}
    assert task_finish(task_id=tasks[0].pk, worker=owner, status="done", result="late") is None


@pytest.mark.django_db
def test_unstarted_claims_go_back_to_the_queue_when_the_worker_stops(teams):
    ops, _db, _web = teams
    tasks = [task_enqueue(team=ops, text=f"t{i}") for i in range(3)]
    pull = PullWorker(threads=3, execute=lambda task, owner: "done")
    owner = batch_owner()
    for task in task_claim_batch(worker=owner, limit=3):
        pull._handoff.put((task, owner))
    pull._idle = 0
    pull.stop.set()

    pull._hand_back_unstarted()

    assert statuses(tasks) == ["pending"] * 3
    assert all(t.attempts == 0 and t.lease_owner == "" for t in Task.objects.all())
    assert pull.busy == 0


@pytest.mark.django_db
def test_run_next_task_runs_the_most_urgent_admissible_task(teams, scripted_provider):
    ops, db, _web = teams
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    task_enqueue(team=ops, text="later")
    first = task_enqueue(team=db, text="first", priority=P.HIGH)
    assert run_next_task("w") == "done"
    assert Task.objects.get(pk=first.pk).status == "done"


@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_never_take_a_task_twice_nor_lose_one(teams):
    tasks = [task_enqueue(team=teams[i % 3], text=f"t{i}") for i in range(120)]
    for team in teams:
        set_cap(team.name, 50)
    seen: list[int] = []
    lock = threading.Lock()

    def claimer(limit: int) -> None:
        try:
            misses = 0
            while misses < 20:
                owner = batch_owner()
                batch = task_claim_batch(worker=owner, limit=limit)
                if not batch:
                    misses += 1
                    continue
                misses = 0
                with lock:
                    seen.extend(t.pk for t in batch)
                for task in batch:
                    task_finish(
                        task_id=task.pk, worker=owner, status="done", result="ok", held=task
                    )
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(1 + i % 4,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(seen) == sorted(t.pk for t in tasks)
    assert Counter(Task.objects.values_list("status", "attempts")) == {("done", 1): 120}


@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_respect_every_teams_cap(teams):
    for team in teams:
        set_cap(team.name, 2)
        for i in range(10):
            task_enqueue(team=team, text=f"{team.name} {i}")

    def claimer() -> None:
        try:
            for _ in range(30):
                task_claim_batch(worker=batch_owner(), limit=3)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    running = Counter(Task.objects.filter(status="running").values_list("team__name", flat=True))
    assert running == {"ops": 2, "db": 2, "web": 2}


@pytest.mark.django_db(transaction=True)
def test_a_pull_worker_runs_everything_once_and_hands_back_nothing_it_started(teams):
    tasks = [task_enqueue(team=teams[i % 3], text=f"t{i}") for i in range(30)]
    ran: list[int] = []

    def execute(task: Task, owner: str) -> str:
        ran.append(task.pk)
        task_finish(task_id=task.pk, worker=owner, status="done", result="ok", held=task)
        return "done"

    pull = PullWorker(threads=3, execute=execute, poll=0.05)
    pull.start()
    try:
        deadline = threading.Event()
        for _ in range(600):
            if Task.objects.filter(status="done").count() == 30:
                break
            deadline.wait(0.05)
    finally:
        pull.stop.set()
        pull.join()
    assert sorted(ran) == sorted(t.pk for t in tasks)
    assert Counter(Task.objects.values_list("status", "attempts")) == {("done", 1): 30}


@pytest.mark.django_db
def test_a_batch_smaller_than_the_number_of_teams_takes_the_most_urgent_of_them_all(teams):
    ops, db, web = teams
    later = [task_enqueue(team=t, text=f"{t.name} normal") for t in (ops, db, web)]
    urgent = task_enqueue(team=web, text="web high", priority=P.HIGH)

    first = task_claim_batch(worker="w", limit=2)
    second = task_claim_batch(worker="w", limit=2)

    assert [t.pk for t in first] == [urgent.pk, later[0].pk]
    assert [t.pk for t in second] == [later[1].pk, later[2].pk]


@pytest.mark.django_db
def test_a_full_teams_backlog_at_the_head_of_the_queue_does_not_starve_the_other_teams(teams):
    """The claim named its teams from the head of the queue alone (200 tasks): a team at its
    cap with a longer backlog filled it, and a task of another team queued after that backlog
    waited until the backlog drained."""
    ops, db, _web = teams
    set_cap("ops", 1)
    Task.objects.bulk_create([Task(team=ops, text=f"backlog {i}") for i in range(300)])
    behind = task_enqueue(team=db, text="queued behind the backlog")

    batch = task_claim_batch(worker="w", limit=4)

    assert [t.team.name for t in batch] == ["ops", "db"]
    assert batch[1].pk == behind.pk
    assert task_claim_batch(worker="w", limit=4) == []  # ops is full, db has nothing left


@pytest.mark.django_db
def test_a_pull_worker_runs_a_task_queued_behind_a_full_teams_backlog(teams, scripted_provider):
    ops, db, _web = teams
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    set_cap("ops", 1)
    task_claim_batch(worker="elsewhere", limit=1)  # nothing queued yet: claims nothing
    Task.objects.bulk_create([Task(team=ops, text=f"backlog {i}") for i in range(300)])
    [running] = task_claim_batch(worker="elsewhere", limit=1)  # ops is now at its cap
    behind = task_enqueue(team=db, text="queued behind the backlog")

    assert run_next_task("w") == "done"

    assert Task.objects.get(pk=behind.pk).status == "done"
    assert Task.objects.get(pk=running.pk).lease_owner == "elsewhere"
    assert Task.objects.filter(team=ops, status="pending").count() == 299

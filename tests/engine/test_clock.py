"""The engine loop: leadership by lease, priority dispatch bounded by worker slots, reaping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from openhive.clock import EngineLoop
from openhive.engine.models import EngineLease
from tasks.models import Task
from tests.factories import TaskFactory, TeamFactory

pytestmark = pytest.mark.django_db


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _loop(clock: FakeClock, sent: list[int], slots: int = 10) -> EngineLoop:
    return EngineLoop(
        enqueue=lambda task_id, *_team: sent.append(task_id), clock=clock, slots=slots
    )


def test_only_one_of_two_loops_leads_and_dispatches(clock):
    TaskFactory.create_batch(3)
    first_sent, second_sent = [], []
    first, second = _loop(clock, first_sent), _loop(clock, second_sent)
    first.tick()
    second.tick()
    assert first.leading and not second.leading
    assert len(first_sent) == 3 and second_sent == []


def test_a_waiting_loop_takes_over_when_the_leader_stops_renewing(clock):
    first, second = _loop(clock, []), _loop(clock, [])
    first.tick()
    clock.advance(60)  # the first loop has died: its lease runs out
    second.tick()
    assert second.leading
    assert EngineLease.objects.get().holder == second.holder


def test_dispatch_follows_priority_then_age(clock, time_machine):
    team = TeamFactory()
    time_machine.move_to(clock.now - timedelta(minutes=5), tick=False)
    low = TaskFactory(team=team, priority=Task.Priority.LOW)
    normal_old = TaskFactory(team=team, priority=Task.Priority.NORMAL)
    time_machine.move_to(clock.now - timedelta(minutes=1), tick=False)
    normal_new = TaskFactory(team=team, priority=Task.Priority.NORMAL)
    critical = TaskFactory(team=team, priority=Task.Priority.CRITICAL)
    sent: list[int] = []
    _loop(clock, sent).tick()
    assert sent == [critical.pk, normal_old.pk, normal_new.pk, low.pk]


def test_dispatch_never_hands_out_more_tasks_than_free_worker_slots(clock):
    team = TeamFactory()
    TaskFactory.create_batch(5, team=team)
    TaskFactory(team=team, status=Task.Status.RUNNING)
    sent: list[int] = []
    loop = _loop(clock, sent, slots=3)
    loop.tick()
    assert len(sent) == 2  # one slot is taken by the running task
    loop.tick()
    assert len(sent) == 2  # the two dispatched tasks are not claimed yet


def test_a_later_critical_task_overtakes_the_waiting_backlog(clock):
    team = TeamFactory()
    backlog = TaskFactory.create_batch(3, team=team, priority=Task.Priority.LOW)
    sent: list[int] = []
    loop = _loop(clock, sent, slots=1)
    loop.tick()
    assert sent == [backlog[0].pk]
    Task.objects.filter(pk=backlog[0].pk).update(status=Task.Status.DONE)
    critical = TaskFactory(team=team, priority=Task.Priority.CRITICAL)
    clock.advance(1)
    loop.tick()
    assert sent[-1] == critical.pk


def test_an_unclaimed_dispatch_is_handed_out_again_after_the_redispatch_delay(clock, settings):
    task = TaskFactory()
    sent: list[int] = []
    loop = _loop(clock, sent)
    loop.tick()
    clock.advance(settings.OPENHIVE["REDISPATCH_SECONDS"] + 1)
    loop.tick()
    assert sent == [task.pk, task.pk]


def test_leader_requeues_a_task_whose_worker_lease_expired(clock):
    task = TaskFactory(
        status=Task.Status.RUNNING,
        lease_owner="dead-worker",
        lease_expires_at=clock.now - timedelta(seconds=1),
        attempts=1,
    )
    loop = _loop(clock, [], slots=0)
    stats = loop.tick()
    task.refresh_from_db()
    assert stats["requeued"] == 1
    assert task.status == Task.Status.PENDING and task.lease_owner == ""


def test_registered_clock_jobs_run_on_the_leader_at_their_interval(clock, monkeypatch):
    from openhive.core import jobs

    runs: list[datetime] = []
    monkeypatch.setattr(jobs, "_JOBS", dict(jobs._JOBS))
    jobs.clock_job("probe", every_seconds=10, order=99)(lambda now: runs.append(now) or {})
    leader, follower = _loop(clock, []), _loop(clock, [])
    for _ in range(4):
        leader.tick()
        follower.tick()
        clock.advance(4)
    assert runs == [
        datetime(2026, 11, 21, 12, 0, tzinfo=UTC),
        datetime(2026, 11, 21, 12, 0, 12, tzinfo=UTC),
    ]


def test_a_loop_beside_pull_workers_leads_and_runs_its_jobs_but_hands_out_nothing(clock):
    task = TaskFactory()
    sent: list[int] = []
    loop = EngineLoop(
        enqueue=lambda task_id, *_team: sent.append(task_id),
        clock=clock,
        slots=10,
        dispatching=False,
    )
    stats = loop.tick()
    assert loop.leading and stats["dispatched"] == 0 and sent == []
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING and task.dispatched_at is None


def test_a_task_handed_to_django_q_carries_its_teams_id_and_name(clock, monkeypatch):
    import django_q.tasks

    handed: list[tuple] = []
    monkeypatch.setattr(
        django_q.tasks, "async_task", lambda func, *args, **kwargs: handed.append((func, *args))
    )
    team = TeamFactory()
    task = TaskFactory(team=team)
    EngineLoop(clock=clock, slots=10).tick()
    assert handed == [("tasks.runner.run_task", task.pk, team.pk, team.name)]

"""A task whose model provider stays down goes back to the queue with a delay (bounded, the
reason visible), and the queue does not hand it out before the delay is over."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from tasks.models import Task
from tasks.runner import run_next_task, run_task
from tasks.selectors import tasks_admissible
from tasks.services import task_enqueue
from tasks.timing import defer_delay
from teams.config import default_config, write_team_config
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db(transaction=True)

DOWN = [{"when": {}, "reply": {"error": {"status": 503, "message": "overloaded"}}}]


@pytest.fixture(autouse=True)
def quick(settings):
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "LLM_RETRIES": 1,
        "LLM_BACKOFF_SECONDS": 0.001,
        "LLM_BACKOFF_MAX_SECONDS": 0.001,
        "PROVIDER_REQUEUE_MAX": 2,
        "PROVIDER_REQUEUE_SECONDS": 60,
        "PROVIDER_REQUEUE_MAX_SECONDS": 600,
    }


@pytest.fixture
def ops(main_team):
    team = TeamFactory(name="ops", parent=main_team, bootstrapped=True)
    write_team_config(default_config("ops", parent="main"))
    return team


def test_provider_down_puts_the_task_back_with_a_delay_and_the_reason(ops, scripted_provider):
    scripted_provider(DOWN)
    task = task_enqueue(team=ops, text="check the disks")
    before = timezone.now()
    assert run_task(task.pk) == Task.Status.PENDING
    task.refresh_from_db()
    assert task.status == "pending" and task.defer_count == 1 and task.lease_owner == ""
    assert task.run_after >= before + timedelta(seconds=59)
    assert (
        "overloaded" in task.defer_reason and "put back in the queue (1 of 2)" in task.defer_reason
    )
    assert task.sessions.get().stop_reason == "error"


def test_a_deferred_task_is_not_handed_out_before_its_time(ops, scripted_provider):
    scripted_provider(DOWN)
    task = task_enqueue(team=ops, text="check the disks")
    run_task(task.pk)
    task.refresh_from_db()
    now = timezone.now()
    assert tasks_admissible(now=now, limit=10) == []
    assert run_task(task.pk) == "not-admitted"
    assert run_next_task("w2") is None
    later = task.run_after + timedelta(seconds=1)
    assert tasks_admissible(now=later, limit=10) == [task.pk]
    scripted_provider([{"when": {}, "reply": {"content": "disks fine"}}])
    with time_machine.travel(later, tick=True):
        assert run_task(task.pk) == Task.Status.DONE
    task.refresh_from_db()
    assert task.result == "disks fine" and task.defer_count == 1


def test_after_the_last_requeue_the_task_fails_with_the_reason(ops, scripted_provider):
    scripted_provider(DOWN)
    task = task_enqueue(team=ops, text="check the disks")
    moment = timezone.now()
    for _ in range(2):
        with time_machine.travel(moment, tick=True):
            run_task(task.pk)
        task.refresh_from_db()
        moment = task.run_after + timedelta(seconds=1)
    with time_machine.travel(moment, tick=True):
        assert run_task(task.pk) == Task.Status.FAILED
    task.refresh_from_db()
    assert task.defer_count == 2 and task.status == "failed"
    assert "overloaded" in task.result and "giving up" in task.result
    assert task.sessions.count() == 3


def test_requeue_delay_doubles_honours_retry_after_and_is_capped():
    assert defer_delay(0, None) == 60 and defer_delay(1, None) == 120
    assert defer_delay(0, 300) == 300
    assert defer_delay(5, None) == 600


def test_a_window_triggers_task_carries_its_window_for_the_budgets(ops):
    from datetime import UTC, datetime

    from tasks.runner import trigger_window_of
    from triggers.models import TriggerConfig
    from triggers.services.firing import task_options

    opened = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
    trigger = TriggerConfig(pk=7, team=ops, name="watch", type="window", window_opened_at=opened)
    options = task_options(trigger)
    assert options["window_opened_at"] == opened.isoformat()
    task = Task(team=ops, text="tick", options=options)
    window = trigger_window_of(task)
    assert window.trigger_id == 7 and window.opened_at == opened
    assert trigger_window_of(Task(team=ops, text="x", options={"trigger_id": 7})) is None

"""The firing pipeline against the real database: active check, dedup, rate limit, overlap
(with real cancellation), the breaker on task end, and test_trigger."""

from __future__ import annotations

from datetime import timedelta

import pytest

from openhive.chat.models import OutboxMessage
from tasks.models import Task
from tasks.services import task_finish
from tests.factories import claim
from triggers.models import TriggerConfig, TriggerEvent
from triggers.services import trigger_disable, trigger_fire, trigger_test

pytestmark = pytest.mark.django_db


def finish(task_id: int, status: str, result: str = "ok") -> Task | None:
    claim(task_id=task_id, worker="w1")
    return task_finish(task_id=task_id, worker="w1", status=status, result=result)


def test_firing_enqueues_a_trigger_task_and_tracks_it(make_trigger, clock):
    trigger = make_trigger(max_turns=7)
    result = trigger_fire(trigger_id=trigger.pk, event_key="schedule:a", now=clock.now)
    task = Task.objects.get(pk=result.task_id)
    assert result.outcome == "fired"
    assert task.type == Task.Type.TRIGGER and task.team == trigger.team
    assert "Check the servers." in task.text
    assert task.options["max_turns"] == 7 and task.options["trigger_id"] == trigger.pk
    trigger.refresh_from_db()
    assert trigger.active_task_id == task.pk and trigger.last_fired_at == clock.now


def test_a_disabled_or_pending_trigger_never_fires(make_trigger, clock):
    pending = make_trigger(name="pending", enable=False)
    disabled = trigger_disable(trigger=make_trigger(name="off"))
    for trigger in (pending, disabled):
        assert (
            trigger_fire(trigger_id=trigger.pk, event_key="k", now=clock.now).outcome == "inactive"
        )
    assert not Task.objects.filter(type=Task.Type.TRIGGER).exists()


def test_the_same_event_fires_a_trigger_only_once(make_trigger, clock):
    trigger = make_trigger(overlap_policy="allow")
    first = trigger_fire(trigger_id=trigger.pk, event_key="message:12", now=clock.now)
    second = trigger_fire(trigger_id=trigger.pk, event_key="message:12", now=clock.advance(5))
    assert (first.outcome, second.outcome) == ("fired", "duplicate")
    assert Task.objects.filter(type=Task.Type.TRIGGER).count() == 1


def test_event_triggers_are_rate_limited_per_minute(make_trigger, clock):
    trigger = make_trigger(
        type="keyword", config={"keywords": ["alert"], "rate_per_minute": 2}, overlap_policy="allow"
    )
    outcomes = [
        trigger_fire(trigger_id=trigger.pk, event_key=f"message:{i}", now=clock.advance(1)).outcome
        for i in range(3)
    ]
    assert outcomes == ["fired", "fired", "rate_limited"]
    later = trigger_fire(trigger_id=trigger.pk, event_key="message:9", now=clock.advance(60))
    assert later.outcome == "fired"
    assert TriggerEvent.objects.filter(outcome="rate_limited").count() == 1


def test_always_skip_keeps_the_running_task_and_records_an_alert(make_trigger, clock):
    trigger = make_trigger(overlap_policy="always-skip")
    first = trigger_fire(trigger_id=trigger.pk, event_key="a", now=clock.now)
    claim(task_id=first.task_id, worker="w1")
    second = trigger_fire(trigger_id=trigger.pk, event_key="b", now=clock.advance(60))
    assert second.outcome == "skipped"
    assert Task.objects.get(pk=first.task_id).status == Task.Status.RUNNING
    assert Task.objects.filter(type=Task.Type.TRIGGER).count() == 1
    trigger.refresh_from_db()
    assert "skipped" in trigger.last_alert


def test_skip_then_replace_skips_once_then_cancels_the_old_task(make_trigger, clock):
    trigger = make_trigger()  # the default policy
    first = trigger_fire(trigger_id=trigger.pk, event_key="a", now=clock.now)
    claim(task_id=first.task_id, worker="w1")
    skipped = trigger_fire(trigger_id=trigger.pk, event_key="b", now=clock.advance(60))
    replaced = trigger_fire(trigger_id=trigger.pk, event_key="c", now=clock.advance(60))
    assert skipped.outcome == "skipped"
    assert replaced.outcome == "replaced" and replaced.replaced_task_id == first.task_id
    assert Task.objects.get(pk=first.task_id).status == Task.Status.CANCELLED
    trigger.refresh_from_db()
    assert trigger.active_task_id == replaced.task_id and trigger.overlap_count == 0


def test_a_late_result_of_a_replaced_task_stays_cancelled_and_is_no_failure(make_trigger, clock):
    trigger = make_trigger(overlap_policy="always-replace", failure_threshold=1)
    first = trigger_fire(trigger_id=trigger.pk, event_key="a", now=clock.now)
    claim(task_id=first.task_id, worker="w1")
    trigger_fire(trigger_id=trigger.pk, event_key="b", now=clock.advance(60))
    late = task_finish(task_id=first.task_id, worker="w1", status="failed", result="boom")
    assert late is None
    assert Task.objects.get(pk=first.task_id).status == Task.Status.CANCELLED
    trigger.refresh_from_db()
    assert trigger.consecutive_failures == 0 and trigger.state == TriggerConfig.State.ACTIVE


def test_a_stale_active_task_reference_does_not_block_the_next_firing(make_trigger, clock):
    trigger = make_trigger(overlap_policy="always-skip")
    first = trigger_fire(trigger_id=trigger.pk, event_key="a", now=clock.now)
    # The task ends behind the engine's back (no task_finished): the reference goes stale.
    Task.objects.filter(pk=first.task_id).update(status=Task.Status.CANCELLED)
    trigger.refresh_from_db()
    assert trigger.active_task_id == first.task_id
    again = trigger_fire(trigger_id=trigger.pk, event_key="b", now=clock.advance(60))
    assert again.outcome == "fired"


def test_allow_policy_runs_firings_side_by_side_without_tracking(make_trigger, clock):
    trigger = make_trigger(overlap_policy="allow")
    results = [
        trigger_fire(trigger_id=trigger.pk, event_key=str(i), now=clock.advance(60))
        for i in range(3)
    ]
    assert [r.outcome for r in results] == ["fired"] * 3
    trigger.refresh_from_db()
    assert trigger.active_task_id is None


def test_a_finished_run_clears_the_active_task_and_the_overlap_count(make_trigger, clock):
    trigger = make_trigger()
    first = trigger_fire(trigger_id=trigger.pk, event_key="a", now=clock.now)
    claim(task_id=first.task_id, worker="w1")
    trigger_fire(trigger_id=trigger.pk, event_key="b", now=clock.advance(60))  # skipped
    task_finish(task_id=first.task_id, worker="w1", status="done", result="fine")
    trigger.refresh_from_db()
    assert trigger.active_task_id is None and trigger.overlap_count == 0


def test_breaker_disables_after_consecutive_failures_and_tells_parent_and_chat(make_trigger, clock):
    trigger = make_trigger(failure_threshold=2, overlap_policy="allow")
    TriggerConfig.objects.filter(pk=trigger.pk).update(source_channel="ws:op")
    for key in ("a", "b"):
        fired = trigger_fire(trigger_id=trigger.pk, event_key=key, now=clock.advance(60))
        finish(fired.task_id, "failed", "Error: the disk tool is missing")
    trigger.refresh_from_db()
    assert trigger.state == TriggerConfig.State.DISABLED
    assert trigger.disabled_reason == "2 consecutive failures"
    escalation = Task.objects.get(type=Task.Type.ESCALATION)
    assert escalation.team.name == "main" and "nightly" in escalation.text
    assert OutboxMessage.objects.filter(channel_id="ws:op", content__contains="disabled").exists()
    assert trigger_fire(trigger_id=trigger.pk, event_key="c", now=clock.now).outcome == "inactive"


def test_a_success_resets_the_failure_count(make_trigger, clock):
    trigger = make_trigger(failure_threshold=3, overlap_policy="allow")
    for key, status in (("a", "failed"), ("b", "failed"), ("c", "done"), ("d", "failed")):
        fired = trigger_fire(trigger_id=trigger.pk, event_key=key, now=clock.advance(60))
        finish(fired.task_id, status)
    trigger.refresh_from_db()
    assert trigger.consecutive_failures == 1 and trigger.state == TriggerConfig.State.ACTIVE


def test_test_trigger_fires_in_any_state_without_tracking_or_breaker(make_trigger):
    trigger = make_trigger(enable=False, failure_threshold=1)
    result = trigger_test(trigger=trigger, max_turns=3)
    task = Task.objects.get(pk=result.task_id)
    assert task.options["trigger_test"] is True and task.options["max_turns"] == 3
    finish(task.pk, "failed")
    trigger.refresh_from_db()
    assert trigger.active_task_id is None
    assert (trigger.state, trigger.consecutive_failures) == ("pending", 0)


def test_test_trigger_respects_the_overlap_policy_of_a_run_in_progress(make_trigger, clock):
    skipper = make_trigger(name="skipper", overlap_policy="always-skip")
    running = trigger_fire(trigger_id=skipper.pk, event_key="a", now=clock.now)
    assert trigger_test(trigger=skipper).outcome == "skipped"
    replacer = make_trigger(name="replacer", overlap_policy="always-replace")
    old = trigger_fire(trigger_id=replacer.pk, event_key="a", now=clock.now)
    result = trigger_test(trigger=replacer)
    assert result.outcome == "replaced" and result.replaced_task_id == old.task_id
    assert Task.objects.get(pk=old.task_id).status == Task.Status.CANCELLED
    assert Task.objects.get(pk=running.task_id).status == Task.Status.PENDING


def test_dedup_history_is_pruned_after_its_retention(make_trigger, clock):
    from triggers.jobs import trigger_event_cleanup

    trigger = make_trigger(overlap_policy="allow")
    trigger_fire(trigger_id=trigger.pk, event_key="old", now=clock.now)
    trigger_fire(trigger_id=trigger.pk, event_key="new", now=clock.now + timedelta(days=3))
    assert trigger_event_cleanup(clock.now + timedelta(days=3)) == {"trigger_events_pruned": 1}
    assert list(TriggerEvent.objects.values_list("key", flat=True)) == ["new"]


def test_a_run_waiting_for_a_person_still_counts_as_the_triggers_run_in_progress(
    make_trigger, clock
):
    trigger = make_trigger(overlap_policy="always-skip")
    first = trigger_fire(trigger_id=trigger.pk, event_key="a", now=clock.now)
    Task.objects.filter(pk=first.task_id).update(status=Task.Status.WAITING_FOR_USER)
    assert trigger_fire(trigger_id=trigger.pk, event_key="b", now=clock.advance(60)).outcome == (
        "skipped"
    )
    assert trigger_test(trigger=trigger).outcome == "skipped"
    from tasks.selectors import in_flight_tasks

    assert [t["task_id"] for t in in_flight_tasks(team=trigger.team)] == [first.task_id]

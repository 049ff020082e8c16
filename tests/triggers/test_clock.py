"""The trigger clock on the real engine loop, driven by a fake clock: schedule slots fire once
(restarts and several loops included), misfires are reported, windows tick and stop, and a
broken trigger row never stops the loop."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from openhive.clock import EngineLoop
from openhive.engine.models import Session
from openhive.engine.services import engine_resign
from tasks.models import Task
from tests.factories import claim
from triggers.clock import _schedule_step
from triggers.jobs import trigger_clock
from triggers.models import TriggerConfig, TriggerEvent
from triggers.validation import validate_config

pytestmark = pytest.mark.django_db


def loop(clock) -> EngineLoop:
    return EngineLoop(enqueue=lambda *_handed: None, clock=clock, slots=0)


def trigger_tasks(trigger: TriggerConfig | None = None):
    rows = Task.objects.filter(type=Task.Type.TRIGGER)
    return rows.filter(options__trigger_id=trigger.pk) if trigger else rows


def fire_times(trigger: TriggerConfig) -> list[datetime]:
    fired = TriggerEvent.objects.filter(trigger=trigger, outcome__in=["fired", "replaced"])
    return list(fired.order_by("created_at").values_list("created_at", flat=True))


def run_until(engine: EngineLoop, clock, until: datetime, step: float = 0.1) -> None:
    while clock.now < until:
        clock.advance(step)
        engine.tick()


def test_schedule_fires_once_at_the_slot_boundary(make_trigger, clock):
    trigger = make_trigger(config={"cron": "0 9 * * *"}, overlap_policy="allow")
    engine = loop(clock)
    engine.tick()  # arms: 09:00 today
    clock.now = datetime(2026, 11, 20, 8, 59, 58, tzinfo=UTC)
    run_until(engine, clock, datetime(2026, 11, 20, 8, 59, 59, 900_000, tzinfo=UTC))
    assert trigger_tasks().count() == 0
    run_until(engine, clock, datetime(2026, 11, 20, 9, 0, 30, tzinfo=UTC))
    assert trigger_tasks().count() == 1
    [fired] = fire_times(trigger)
    assert fired - datetime(2026, 11, 20, 9, tzinfo=UTC) < timedelta(seconds=0.25)
    trigger.refresh_from_db()
    assert trigger.next_fire_at == datetime(2026, 11, 21, 9, tzinfo=UTC)


def test_restarting_the_engine_during_a_slot_never_runs_it_twice(make_trigger, clock):
    make_trigger(config={"cron": "* * * * *"}, overlap_policy="allow")
    first = loop(clock)
    first.tick()
    clock.now = datetime(2026, 11, 20, 8, 58, 59, 500_000, tzinfo=UTC)
    run_until(first, clock, datetime(2026, 11, 20, 8, 59, 0, 200_000, tzinfo=UTC))
    before = trigger_tasks().count()
    assert before == 1  # the 08:59 slot ran
    engine_resign(holder=first.holder)  # the process stops mid-slot ...
    restarted = loop(clock)  # ... and a new one takes over within the same minute
    run_until(restarted, clock, datetime(2026, 11, 20, 8, 59, 59, tzinfo=UTC), step=0.5)
    assert trigger_tasks().count() == before
    slots = [t.correlation_id for t in trigger_tasks()]
    assert len(slots) == len(set(slots))


def test_a_restart_before_the_slot_was_taken_still_runs_it_once(make_trigger, clock):
    make_trigger(config={"cron": "0 9 * * *"}, overlap_policy="allow")
    first = loop(clock)
    first.tick()  # armed, then the process dies before 09:00
    engine_resign(holder=first.holder)
    clock.now = datetime(2026, 11, 20, 9, 0, 20, tzinfo=UTC)  # back 20 s into the slot
    restarted = loop(clock)
    run_until(restarted, clock, datetime(2026, 11, 20, 9, 0, 30, tzinfo=UTC))
    assert trigger_tasks().count() == 1


def test_two_loops_acting_on_the_same_stale_row_fire_the_slot_once(make_trigger, clock):
    trigger = make_trigger(config={"cron": "0 9 * * *"}, overlap_policy="allow")
    TriggerConfig.objects.filter(pk=trigger.pk).update(
        next_fire_at=datetime(2026, 11, 20, 9, tzinfo=UTC)
    )
    now = datetime(2026, 11, 20, 9, 0, 0, 100_000, tzinfo=UTC)
    first_view = TriggerConfig.objects.select_related("team").get(pk=trigger.pk)
    second_view = TriggerConfig.objects.select_related("team").get(pk=trigger.pk)
    config = validate_config("schedule", trigger.config)
    fired = [_schedule_step(view, config, UTC, now) for view in (first_view, second_view)]
    assert fired == [1, 0]
    assert trigger_tasks().count() == 1


def test_an_invalid_trigger_row_is_disabled_and_the_others_keep_firing(make_trigger, clock):
    broken = make_trigger(name="broken", config={"cron": "0 9 * * *"})
    healthy = make_trigger(name="healthy", config={"cron": "* * * * *"})
    TriggerConfig.objects.filter(pk=broken.pk).update(config={"cron": "every morning"})
    engine = loop(clock)
    engine.tick()
    clock.now = datetime(2026, 11, 20, 8, 58, 59, tzinfo=UTC)
    run_until(engine, clock, datetime(2026, 11, 20, 8, 59, 1, tzinfo=UTC))
    broken.refresh_from_db()
    assert broken.state == TriggerConfig.State.DISABLED
    assert "invalid config" in broken.disabled_reason and "cron" in broken.disabled_reason
    assert trigger_tasks(healthy).count() == 1


def test_a_bad_timezone_in_the_database_disables_only_that_trigger(make_trigger, clock):
    trigger = make_trigger(timezone="Europe/Berlin")
    TriggerConfig.objects.filter(pk=trigger.pk).update(timezone="Mars/Olympus")
    assert trigger_clock(clock.now) == {}
    trigger.refresh_from_db()
    assert trigger.state == TriggerConfig.State.DISABLED


@pytest.mark.parametrize(("policy", "expected"), [("skip", 0), ("run_once", 1)])
def test_downtime_applies_the_misfire_policy_and_tells_the_operator(
    make_trigger, clock, policy, expected
):
    trigger = make_trigger(config={"cron": "0 * * * *"}, misfire_policy=policy)
    TriggerConfig.objects.filter(pk=trigger.pk).update(
        next_fire_at=datetime(2026, 11, 20, 6, tzinfo=UTC)
    )
    trigger_clock(datetime(2026, 11, 20, 9, 30, tzinfo=UTC))
    assert trigger_tasks().count() == expected
    trigger.refresh_from_db()
    assert "missed 4 slot(s)" in trigger.last_alert
    assert trigger.next_fire_at == datetime(2026, 11, 20, 10, tzinfo=UTC)


def test_schedule_uses_the_trigger_timezone_then_the_server_tz(make_trigger, clock, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "TZ": "America/New_York"}
    berlin = make_trigger(name="berlin", timezone="Europe/Berlin")
    server = make_trigger(name="server")
    trigger_clock(clock.now)
    berlin.refresh_from_db()
    server.refresh_from_db()
    assert berlin.next_fire_at == datetime(2026, 11, 21, 8, tzinfo=UTC)  # 09:00 CET
    assert server.next_fire_at == datetime(2026, 11, 20, 14, tzinfo=UTC)  # 09:00 EST


WINDOW = {
    "watch_window": "0-1 9 * * *",
    "tick_interval_ms": 2000,
    "max_ticks_per_window": 5,
    "max_tokens_per_window": 100_000,
}


def test_window_ticks_every_two_seconds_while_open_and_stops_at_max_ticks(make_trigger, clock):
    trigger = make_trigger(type="window", config=WINDOW, overlap_policy="allow")
    engine = loop(clock)
    clock.now = datetime(2026, 11, 20, 8, 59, 59, tzinfo=UTC)
    run_until(engine, clock, datetime(2026, 11, 20, 9, 2, 1, tzinfo=UTC), step=0.25)
    ticks = fire_times(trigger)
    opened = datetime(2026, 11, 20, 9, tzinfo=UTC)
    assert [round((t - opened).total_seconds()) for t in ticks] == [0, 2, 4, 6, 8]
    trigger.refresh_from_db()
    assert trigger.window_opened_at is None  # closed at 09:02
    assert "max_ticks_per_window" in trigger.last_alert


def test_window_stops_ticking_once_its_sessions_used_the_token_cap(make_trigger, clock):
    config = {**WINDOW, "max_tokens_per_window": 500}
    trigger = make_trigger(type="window", config=config, overlap_policy="allow")
    engine = loop(clock)
    clock.now = datetime(2026, 11, 20, 8, 59, 59, tzinfo=UTC)
    run_until(engine, clock, datetime(2026, 11, 20, 9, 0, 1, tzinfo=UTC))
    first = trigger_tasks().get()
    Session.objects.create(team=first.team, task=first, prompt_tokens=450, completion_tokens=60)
    run_until(engine, clock, datetime(2026, 11, 20, 9, 1, 50, tzinfo=UTC), step=0.5)
    assert trigger_tasks().count() == 1
    trigger.refresh_from_db()
    assert "max_tokens_per_window" in trigger.last_alert


def test_window_close_lets_the_current_tick_finish_and_starts_no_more(make_trigger, clock):
    trigger = make_trigger(type="window", config={**WINDOW, "max_ticks_per_window": 1000})
    engine = loop(clock)
    clock.now = datetime(2026, 11, 20, 9, 1, 50, tzinfo=UTC)
    run_until(engine, clock, datetime(2026, 11, 20, 9, 1, 59, 900_000, tzinfo=UTC))
    last = trigger_tasks().order_by("-id").first()
    claim(task_id=last.pk, worker="w1")
    count = trigger_tasks().count()
    run_until(engine, clock, datetime(2026, 11, 20, 9, 2, 30, tzinfo=UTC), step=0.25)
    assert trigger_tasks().count() == count
    assert Task.objects.get(pk=last.pk).status == Task.Status.RUNNING
    trigger.refresh_from_db()
    assert trigger.window_opened_at is None


def test_window_overlap_default_skips_ticks_while_one_runs(make_trigger, clock):
    trigger = make_trigger(type="window", config=WINDOW)
    assert trigger.overlap_policy == "always-skip"
    engine = loop(clock)
    clock.now = datetime(2026, 11, 20, 8, 59, 59, tzinfo=UTC)
    run_until(engine, clock, datetime(2026, 11, 20, 9, 0, 1, tzinfo=UTC))
    claim(task_id=trigger_tasks().get().pk, worker="w1")
    run_until(engine, clock, datetime(2026, 11, 20, 9, 0, 9, tzinfo=UTC))
    assert trigger_tasks().count() == 1
    trigger.refresh_from_db()
    assert trigger.window_ticks == 5  # each tick counts against the cap, fired or skipped


def test_a_tick_due_within_the_engine_tick_is_waited_for_not_fired_late(make_trigger, monkeypatch):
    """Against the real clock the job waits for a tick due before the loop's next pass. The
    wait is recorded, not slept: time moves only when the test says so."""
    import triggers.jobs as trigger_engine

    real = [datetime(2026, 11, 20, 9, 0, 0, 500_000, tzinfo=UTC)]
    waits: list[float] = []
    this_thread, real_sleep = threading.get_ident(), time.sleep

    def fake_sleep(seconds: float) -> None:
        # `time.sleep` is patched for the whole process: a background thread an earlier test
        # left (an MCP reaper) keeps its own sleeps.
        if threading.get_ident() != this_thread:
            return real_sleep(seconds)
        waits.append(seconds)
        real[0] += timedelta(seconds=seconds)

    monkeypatch.setattr(trigger_engine.timezone, "now", lambda: real[0])
    monkeypatch.setattr(trigger_engine.time, "sleep", fake_sleep)
    trigger = make_trigger(type="window", config=WINDOW, overlap_policy="allow")
    trigger_clock(real[0])  # opens the window: first tick now, the next due at 09:00:02.5
    real[0] = datetime(2026, 11, 20, 9, 0, 2, 400_000, tzinfo=UTC)
    stats = trigger_clock(real[0])
    assert waits == [pytest.approx(0.1)]
    assert stats == {"trigger_fired": 1}
    assert [
        round((t - datetime(2026, 11, 20, 9, tzinfo=UTC)).total_seconds(), 3)
        for t in fire_times(trigger)
    ] == [0.5, 2.5]


@pytest.mark.django_db(transaction=True)
def test_two_engine_loops_racing_on_postgresql_fire_a_slot_once(ops):
    """Two threads (two loops) evaluate the same due slot at the same moment: the row lock and
    the conditional update let exactly one of them enqueue."""
    import threading

    from django.db import connection, connections

    from triggers.clock import clock_pass
    from triggers.services import trigger_create, trigger_enable

    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers itself; the race needs a server database")
    trigger = trigger_enable(
        trigger=trigger_create(
            team=ops,
            name="race",
            type="schedule",
            config={"cron": "0 9 * * *"},
            task="go",
            overlap_policy="allow",
        )
    )
    TriggerConfig.objects.filter(pk=trigger.pk).update(
        next_fire_at=datetime(2026, 11, 20, 9, tzinfo=UTC)
    )
    now = datetime(2026, 11, 20, 9, 0, 0, 100_000, tzinfo=UTC)
    barrier = threading.Barrier(2)
    results: list[dict] = []

    def loop() -> None:
        try:
            barrier.wait()
            results.append(clock_pass(now))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(r["trigger_fired"] for r in results) == [0, 1]
    assert trigger_tasks(trigger).count() == 1


@pytest.mark.parametrize("cron", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_cron_that_never_fires_is_refused_at_every_door(make_trigger, ops, cron):
    from django.test import Client

    from openhive.core.context import ToolContext
    from openhive.engine.tool_calls import call_tool
    from tests.api.factories import UserFactory
    from triggers.validation import InvalidTrigger
    from trust.services import api_token_create

    with pytest.raises(InvalidTrigger, match="never fires"):
        make_trigger(config={"cron": cron})
    UserFactory(username="boss", is_staff=True)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(username='boss')[1]}")
    body = {"team": "ops", "name": "feb", "type": "schedule", "config": {"cron": cron}, "task": "t"}
    answer = api.post("/api/v1/triggers", body, content_type="application/json")
    assert answer.status_code == 400 and "never fires" in answer.json()["detail"]
    window = {"watch_window": cron, "max_ticks_per_window": 1, "max_tokens_per_window": 10}
    ctx = ToolContext(team=ops.parent, actor="main", allowed_tools=["*"])
    result = call_tool(
        ctx,
        "create_trigger",
        {"team": "ops", "name": "win", "type": "window", "config": window, "task": "t"},
    )
    assert result["success"] is False and "never fires" in result["error"]
    assert not TriggerConfig.objects.exists()


def test_a_leap_day_cron_is_accepted(make_trigger):
    assert make_trigger(config={"cron": "0 0 29 2 *"}).state == TriggerConfig.State.ACTIVE


def _alerts(caplog, trigger: TriggerConfig) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"{trigger.name}: disabled" in r.getMessage()]


def test_a_stored_cron_that_never_fires_is_disabled_with_one_alert(make_trigger, clock, caplog):
    from openhive.chat.models import OutboxMessage

    broken = make_trigger(name="feb", config={"cron": "0 9 * * *"}, source_channel="ws:alice")
    healthy = make_trigger(name="healthy", config={"cron": "* * * * *"})
    TriggerConfig.objects.filter(pk=broken.pk).update(
        config={"cron": "0 0 31 2 *"}, next_fire_at=None
    )
    engine = loop(clock)
    run_until(engine, clock, clock.now + timedelta(seconds=120), step=0.25)
    broken.refresh_from_db()
    assert broken.state == TriggerConfig.State.DISABLED and "never fires" in broken.disabled_reason
    assert len(_alerts(caplog, broken)) == 1
    assert OutboxMessage.objects.filter(channel_id="ws:alice").count() == 1
    assert not [r for r in caplog.records if r.exc_info]  # no traceback, let alone four a second
    assert trigger_tasks(healthy).count() >= 1


def test_a_trigger_the_clock_cannot_evaluate_is_disabled_once(
    make_trigger, clock, caplog, monkeypatch
):
    import triggers.clock

    broken = make_trigger(name="odd", config={"cron": "0 9 * * *"})
    healthy = make_trigger(name="healthy", config={"cron": "* * * * *"})
    real = triggers.clock.schedule_decision

    def fails_for_one(**kwargs):
        if kwargs["cron"] == "0 9 * * *":
            raise RuntimeError("no next slot")
        return real(**kwargs)

    monkeypatch.setattr(triggers.clock, "schedule_decision", fails_for_one)
    TriggerConfig.objects.filter(pk=broken.pk).update(next_fire_at=None)
    engine = loop(clock)
    run_until(engine, clock, clock.now + timedelta(seconds=90), step=0.25)
    broken.refresh_from_db()
    assert broken.state == TriggerConfig.State.DISABLED
    assert broken.disabled_reason == "cannot evaluate: no next slot"
    assert len(_alerts(caplog, broken)) == 1
    assert len([r for r in caplog.records if "cannot be evaluated" in r.getMessage()]) == 1
    assert trigger_tasks(healthy).count() >= 1

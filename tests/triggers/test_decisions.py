"""The pure firing decisions, each driven by an explicit `now` (a fake clock): no database,
no sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from triggers.decisions import (
    WindowState,
    breaker_decision,
    cron_matches,
    message_matches,
    next_cron_slot,
    overlap_decision,
    rate_limit_allows,
    schedule_decision,
    window_decision,
    zone,
)

T0 = datetime(2026, 11, 20, 8, 59, 30, tzinfo=UTC)  # a Friday
BERLIN = zone("Europe/Berlin")


def at(hour: int, minute: int, second: float = 0, day: int = 20) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC) + timedelta(seconds=second)


# -- schedule ---------------------------------------------------------------------------------


def test_schedule_first_look_arms_the_next_slot_without_firing():
    decision = schedule_decision(
        cron="0 9 * * *", tz=UTC, next_fire_at=None, now=T0, misfire_policy="skip"
    )
    assert decision.fire_slot is None
    assert decision.next_slot == at(9, 0)


def test_schedule_does_nothing_before_the_slot():
    assert (
        schedule_decision(
            cron="0 9 * * *",
            tz=UTC,
            next_fire_at=at(9, 0),
            now=at(8, 59, 59.9),
            misfire_policy="skip",
        )
        is None
    )


def test_schedule_fires_the_slot_at_its_boundary_and_arms_the_next_day():
    decision = schedule_decision(
        cron="0 9 * * *", tz=UTC, next_fire_at=at(9, 0), now=at(9, 0, 0.1), misfire_policy="skip"
    )
    assert decision.fire_slot == at(9, 0)
    assert decision.next_slot == at(9, 0, day=21)
    assert decision.missed == 0


def test_schedule_slot_fired_once_is_not_due_again_in_the_same_minute():
    first = schedule_decision(
        cron="* * * * *", tz=UTC, next_fire_at=at(9, 0), now=at(9, 0, 1), misfire_policy="skip"
    )
    assert first.fire_slot == at(9, 0)
    again = schedule_decision(
        cron="* * * * *",
        tz=UTC,
        next_fire_at=first.next_slot,
        now=at(9, 0, 50),
        misfire_policy="skip",
    )
    assert again is None


def test_schedule_slot_found_within_the_grace_still_fires_after_a_short_restart():
    decision = schedule_decision(
        cron="0 9 * * *", tz=UTC, next_fire_at=at(9, 0), now=at(9, 0, 45), misfire_policy="skip"
    )
    assert decision.fire_slot == at(9, 0)


def test_misfire_skip_drops_slots_missed_during_downtime_and_counts_them():
    decision = schedule_decision(
        cron="0 * * * *", tz=UTC, next_fire_at=at(6, 0), now=at(9, 30), misfire_policy="skip"
    )
    assert decision.fire_slot is None
    assert decision.missed == 4  # 06:00, 07:00, 08:00, 09:00
    assert decision.next_slot == at(10, 0)


def test_misfire_run_once_runs_only_the_latest_missed_slot():
    decision = schedule_decision(
        cron="0 * * * *", tz=UTC, next_fire_at=at(6, 0), now=at(9, 30), misfire_policy="run_once"
    )
    assert decision.fire_slot == at(9, 0)
    assert decision.missed == 3
    assert decision.next_slot == at(10, 0)


def test_schedule_in_a_trigger_timezone_fires_at_local_wall_time():
    # 09:00 in Berlin is 08:00 UTC in November (CET, UTC+1).
    assert next_cron_slot("0 9 * * *", BERLIN, T0 - timedelta(hours=2)) == at(8, 0)


def test_daily_slot_moves_in_utc_across_the_spring_dst_change():
    before = next_cron_slot("0 9 * * *", BERLIN, datetime(2026, 3, 28, 12, tzinfo=UTC))
    after = next_cron_slot("0 9 * * *", BERLIN, before)
    assert before == datetime(2026, 3, 29, 7, tzinfo=UTC)  # CEST starts that night: UTC+2
    assert after == datetime(2026, 3, 30, 7, tzinfo=UTC)
    before_change = next_cron_slot("0 9 * * *", BERLIN, datetime(2026, 3, 27, 12, tzinfo=UTC))
    assert before_change == datetime(2026, 3, 28, 8, tzinfo=UTC)  # still CET: UTC+1


def test_slot_in_the_skipped_spring_hour_runs_once_right_after_the_jump():
    slot = next_cron_slot("30 2 * * *", BERLIN, datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert slot == datetime(2026, 3, 29, 1, tzinfo=UTC)  # 03:00 CEST, 02:30 never happened
    assert next_cron_slot("30 2 * * *", BERLIN, slot) == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)


def test_slot_in_the_repeated_autumn_hour_fires_once_not_twice():
    first = next_cron_slot("30 2 * * *", BERLIN, datetime(2026, 10, 24, 12, tzinfo=UTC))
    assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST
    second = next_cron_slot("30 2 * * *", BERLIN, first)
    assert second == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)  # next day, 02:30 CET


def test_every_minute_schedule_keeps_running_through_the_repeated_autumn_hour():
    moment = datetime(2026, 10, 25, 0, 59, tzinfo=UTC)  # 02:59 CEST
    assert next_cron_slot("* * * * *", BERLIN, moment) == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)


# -- window -----------------------------------------------------------------------------------

WINDOW = {"cron": "0-4 9 * * *", "tz": UTC, "tick_ms": 2000, "max_ticks": 5, "max_tokens": 10_000}


def run_window(state: WindowState, now: datetime, tokens: int = 0, **overrides):
    params = {**WINDOW, **overrides}
    return window_decision(
        cron=params["cron"],
        tz=params["tz"],
        tick_ms=params["tick_ms"],
        max_ticks=params["max_ticks"],
        max_tokens=params["max_tokens"],
        tokens_used=tokens,
        state=state,
        now=now,
    )


def test_window_stays_closed_outside_its_cron():
    decision = run_window(WindowState(), at(8, 59, 59))
    assert not decision.tick and decision.state == WindowState()


def test_window_opens_on_a_matching_minute_and_ticks_at_once():
    decision = run_window(WindowState(), at(9, 0, 0.05))
    assert decision.event == "opened" and decision.tick
    assert decision.state.opened_at == at(9, 0)
    assert decision.state.ticks == 1
    assert decision.state.next_tick_at == at(9, 0, 2.05)


def test_window_ticks_every_interval_below_a_minute():
    state, ticks, now = WindowState(), [], at(9, 0)
    while now < at(9, 0, 10):
        decision = run_window(state, now, max_ticks=100)
        if decision.tick:
            ticks.append(now)
        state = decision.state
        now += timedelta(milliseconds=100)
    assert [(t - at(9, 0)).total_seconds() for t in ticks] == pytest.approx([0, 2, 4, 6, 8])


def test_window_stops_ticking_at_max_ticks_per_window():
    state, fired, now = WindowState(), 0, at(9, 0)
    while now < at(9, 1):
        decision = run_window(state, now, max_ticks=3)
        fired += decision.tick
        state = decision.state
        now += timedelta(milliseconds=250)
    assert fired == 3
    assert state.ticks == 3 and state.next_tick_at is None


def test_window_stops_ticking_when_the_token_cap_is_used():
    state = run_window(WindowState(), at(9, 0)).state
    decision = run_window(state, at(9, 0, 2), tokens=10_000)
    assert not decision.tick and decision.event == "capped-tokens"


def test_window_closes_on_the_first_minute_that_does_not_match():
    state = run_window(WindowState(), at(9, 4, 58)).state
    decision = run_window(state, at(9, 5, 0.1))
    assert decision.event == "closed" and not decision.tick
    assert decision.state == WindowState()


def test_window_caps_reset_when_the_window_opens_again():
    state = WindowState(opened_at=at(9, 0), seen_at=at(9, 4), ticks=5, next_tick_at=None)
    reopened = run_window(state, at(9, 0, day=21))  # the engine slept through the close
    assert reopened.event == "opened" and reopened.tick
    assert reopened.state.ticks == 1


def test_window_after_a_pause_ticks_once_instead_of_catching_up():
    state = run_window(WindowState(), at(9, 0), max_ticks=100).state
    decision = run_window(state, at(9, 0, 11), max_ticks=100)  # five ticks late
    assert decision.tick and decision.state.ticks == 2
    assert decision.state.next_tick_at == at(9, 0, 13)


def test_window_cron_uses_the_trigger_timezone():
    assert cron_matches("* 9 * * *", BERLIN, at(8, 30))
    assert not cron_matches("* 9 * * *", BERLIN, at(9, 30))


# -- overlap ----------------------------------------------------------------------------------


def test_no_active_task_fires_and_tracks():
    decision = overlap_decision(policy="always-skip", active_task_status=None, overlap_count=0)
    assert (decision.action, decision.track) == ("fire", True)


@pytest.mark.parametrize("status", ["done", "failed", "cancelled"])
def test_stale_active_task_reference_is_treated_as_no_overlap(status):
    decision = overlap_decision(
        policy="skip-then-replace", active_task_status=status, overlap_count=1
    )
    assert (decision.action, decision.stale, decision.overlap_count) == ("fire", True, 0)


@pytest.mark.parametrize("status", ["pending", "running"])
def test_always_skip_skips_every_overlap(status):
    for count in (0, 1, 5):
        decision = overlap_decision(
            policy="always-skip", active_task_status=status, overlap_count=count
        )
        assert decision.action == "skip"


def test_always_replace_replaces_at_the_first_overlap():
    decision = overlap_decision(
        policy="always-replace", active_task_status="running", overlap_count=0
    )
    assert (decision.action, decision.overlap_count) == ("replace", 0)


def test_skip_then_replace_skips_first_then_replaces_then_skips_again():
    actions, count = [], 0
    for _ in range(4):
        decision = overlap_decision(
            policy="skip-then-replace", active_task_status="running", overlap_count=count
        )
        actions.append(decision.action)
        count = decision.overlap_count
    assert actions == ["skip", "replace", "skip", "replace"]


def test_allow_fires_without_tracking_even_when_busy():
    decision = overlap_decision(policy="allow", active_task_status="running", overlap_count=3)
    assert (decision.action, decision.track) == ("fire", False)


# -- breaker, rate limit, matching ------------------------------------------------------------


def test_breaker_trips_at_the_threshold_and_a_success_resets():
    first = breaker_decision(status="failed", consecutive_failures=0, threshold=3)
    second = breaker_decision(status="failed", consecutive_failures=1, threshold=3)
    third = breaker_decision(status="failed", consecutive_failures=2, threshold=3)
    assert (first.trip, second.trip, third.trip) == (False, False, True)
    assert (
        breaker_decision(status="done", consecutive_failures=2, threshold=3).consecutive_failures
        == 0
    )


def test_cancelled_runs_never_count_as_failures():
    decision = breaker_decision(status="cancelled", consecutive_failures=2, threshold=3)
    assert (decision.consecutive_failures, decision.trip) == (2, False)


def test_rate_limit_allows_up_to_the_limit_in_a_sliding_minute():
    now = at(9, 1)
    recent = [now - timedelta(seconds=s) for s in (5, 20, 59)]
    assert not rate_limit_allows(recent=recent, now=now, limit=3, per=timedelta(seconds=60))
    assert rate_limit_allows(
        recent=recent, now=now + timedelta(seconds=2), limit=3, per=timedelta(seconds=60)
    )


def test_keyword_words_match_whole_words_ignoring_case():
    config = {"keywords": ["deploy", "roll back"]}
    assert message_matches(
        type="keyword", config=config, channel_id="c", topic_id=1, text="Please DEPLOY now"
    )
    assert message_matches(
        type="keyword", config=config, channel_id="c", topic_id=1, text="roll back!"
    )
    assert not message_matches(
        type="keyword", config=config, channel_id="c", topic_id=1, text="redeployed"
    )


def test_keyword_regex_and_message_filters():
    assert message_matches(
        type="keyword",
        config={"regex": r"incident-\d+"},
        channel_id="c",
        topic_id=1,
        text="INCIDENT-42 open",
    )
    config = {"pattern": "^status", "channel": "ws:a", "topic_id": 7}
    assert message_matches(
        type="message", config=config, channel_id="ws:a", topic_id=7, text="Status?"
    )
    assert not message_matches(
        type="message", config=config, channel_id="ws:b", topic_id=7, text="status"
    )
    assert not message_matches(
        type="message", config=config, channel_id="ws:a", topic_id=8, text="status"
    )
    assert message_matches(type="message", config={}, channel_id="x", topic_id=1, text="anything")

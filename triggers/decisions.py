"""Every firing decision as a pure function of (config, state, now): no database, no clock of
its own. The clock job and the services feed them rows; the tests feed them a fake clock."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from croniter import croniter

from openhive.core import saferegex

# A slot found this late is still "the current slot" (a short restart, a slow tick); later
# than this, the engine was down and the misfire policy decides.
MISFIRE_GRACE = timedelta(seconds=60)
# A window gap longer than this is a new occurrence without looking minute by minute.
WINDOW_GAP_SCAN_LIMIT = 24 * 60
TERMINAL_TASK_STATES = frozenset({"done", "failed", "cancelled"})


def zone(name: str) -> tzinfo:
    return UTC if name in ("", "UTC") else ZoneInfo(name)


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def _hour_is_fixed(cron: str) -> bool:
    return cron.split()[1] != "*"


def next_cron_slot(cron: str, tz: tzinfo, after: datetime) -> datetime:
    """The first slot strictly after `after`, in UTC. When clocks go back, an hour repeats:
    a job at a fixed hour runs once (like cron), so the repeated wall time is skipped."""
    local_after = after.astimezone(tz)
    it = croniter(cron, local_after)
    candidate: datetime = it.get_next(datetime)
    if _hour_is_fixed(cron):
        while candidate.replace(tzinfo=None) <= local_after.replace(tzinfo=None):
            candidate = it.get_next(datetime)
    return candidate.astimezone(UTC)


def cron_matches(cron: str, tz: tzinfo, moment: datetime) -> bool:
    local = _minute(moment.astimezone(tz)).replace(tzinfo=None)
    return bool(croniter.match(cron, local))


@dataclass(frozen=True)
class ScheduleDecision:
    fire_slot: datetime | None  # the slot to run now, if any
    next_slot: datetime  # what to persist as next_fire_at (always set)
    missed: int = 0  # slots dropped because the engine was down


def schedule_decision(
    *, cron: str, tz: tzinfo, next_fire_at: datetime | None, now: datetime, misfire_policy: str
) -> ScheduleDecision | None:
    """None: nothing to do. A first look only arms the trigger: it never fires a slot that
    passed before it was watched."""
    if next_fire_at is None:
        return ScheduleDecision(fire_slot=None, next_slot=next_cron_slot(cron, tz, now))
    if now < next_fire_at:
        return None
    due: list[datetime] = []
    slot = next_fire_at
    while slot <= now and len(due) < 10_000:
        due.append(slot)
        slot = next_cron_slot(cron, tz, slot)
    next_slot = slot if slot > now else next_cron_slot(cron, tz, now)
    latest = due[-1]
    if now - latest <= MISFIRE_GRACE:
        # The newest slot is current; any older ones were missed while the engine was away.
        return ScheduleDecision(fire_slot=latest, next_slot=next_slot, missed=len(due) - 1)
    if misfire_policy == "run_once":
        return ScheduleDecision(fire_slot=latest, next_slot=next_slot, missed=len(due) - 1)
    return ScheduleDecision(fire_slot=None, next_slot=next_slot, missed=len(due))


@dataclass(frozen=True)
class WindowState:
    opened_at: datetime | None = None
    seen_at: datetime | None = None
    ticks: int = 0
    next_tick_at: datetime | None = None


@dataclass(frozen=True)
class WindowDecision:
    state: WindowState
    tick: bool = False
    event: str = ""  # opened | closed | capped-ticks | capped-tokens | "" (nothing new)


def _same_occurrence(cron: str, tz: tzinfo, seen_at: datetime, now_minute: datetime) -> bool:
    """True if every minute from `seen_at` to `now_minute` matched: no close in between."""
    gap = int((now_minute - seen_at).total_seconds() // 60)
    if gap > WINDOW_GAP_SCAN_LIMIT:
        return False
    return all(cron_matches(cron, tz, seen_at + timedelta(minutes=i)) for i in range(1, gap + 1))


def window_decision(
    *,
    cron: str,
    tz: tzinfo,
    tick_ms: int,
    max_ticks: int,
    max_tokens: int,
    tokens_used: int,
    state: WindowState,
    now: datetime,
) -> WindowDecision:
    """Open on a matching minute, tick every `tick_ms` while open, close on the first minute
    that does not match. The caps end the ticks of this occurrence, not the window."""
    minute = _minute(now)
    is_open = cron_matches(cron, tz, now)
    was_open = state.opened_at is not None
    if not is_open:
        if was_open:
            return WindowDecision(state=WindowState(), event="closed")
        return WindowDecision(state=state)
    event = ""
    if not was_open or not _same_occurrence(cron, tz, _minute(state.seen_at or minute), minute):
        state = WindowState(opened_at=minute, seen_at=minute, ticks=0, next_tick_at=now)
        event = "opened"
    elif state.seen_at != minute:
        state = WindowState(state.opened_at, minute, state.ticks, state.next_tick_at)
    if state.next_tick_at is None or now < state.next_tick_at:
        return WindowDecision(state=state, event=event)
    if state.ticks >= max_ticks:
        return WindowDecision(
            state=WindowState(state.opened_at, state.seen_at, state.ticks, None),
            event=event or "capped-ticks",
        )
    if tokens_used >= max_tokens:
        return WindowDecision(
            state=WindowState(state.opened_at, state.seen_at, state.ticks, None),
            event=event or "capped-tokens",
        )
    # The next tick keeps the cadence of the schedule, not of this (possibly late) tick, but
    # never queues a burst of catch-up ticks after a pause.
    step = timedelta(milliseconds=tick_ms)
    next_tick = state.next_tick_at + step
    if next_tick <= now:
        next_tick = now + step
    return WindowDecision(
        state=WindowState(state.opened_at, state.seen_at, state.ticks + 1, next_tick),
        tick=True,
        event=event,
    )


@dataclass(frozen=True)
class OverlapDecision:
    action: str  # fire | skip | replace
    track: bool  # remember the new task as the trigger's active task
    overlap_count: int
    stale: bool = False  # the remembered task had already ended


def overlap_decision(
    *, policy: str, active_task_status: str | None, overlap_count: int
) -> OverlapDecision:
    if policy == "allow":
        return OverlapDecision("fire", track=False, overlap_count=0)
    if active_task_status is None:
        return OverlapDecision("fire", track=True, overlap_count=0)
    if active_task_status in TERMINAL_TASK_STATES:
        return OverlapDecision("fire", track=True, overlap_count=0, stale=True)
    if policy == "always-skip":
        return OverlapDecision("skip", track=True, overlap_count=overlap_count + 1)
    if policy == "always-replace":
        return OverlapDecision("replace", track=True, overlap_count=0)
    # skip-then-replace: the first overlap waits for the old run, the next one replaces it.
    if overlap_count == 0:
        return OverlapDecision("skip", track=True, overlap_count=1)
    return OverlapDecision("replace", track=True, overlap_count=0)


@dataclass(frozen=True)
class BreakerDecision:
    consecutive_failures: int
    trip: bool


def breaker_decision(*, status: str, consecutive_failures: int, threshold: int) -> BreakerDecision:
    if status == "done":
        return BreakerDecision(0, trip=False)
    if status == "failed":
        count = consecutive_failures + 1
        return BreakerDecision(count, trip=count >= threshold)
    # Cancelled (a replacement, an operator) says nothing about the trigger's health.
    return BreakerDecision(consecutive_failures, trip=False)


def rate_limit_allows(*, recent: list[datetime], now: datetime, limit: int, per: timedelta) -> bool:
    """Sliding window: at most `limit` firings in any `per` ending now."""
    return sum(1 for moment in recent if now - moment < per) < limit


def message_matches(*, type: str, config: dict, channel_id: str, topic_id: int, text: str) -> bool:
    """message: channel/topic filters and an optional regex; keyword: the same filters and a
    word list (whole words) or a regex. All matching ignores case. User patterns run on RE2
    (linear time) over at most the first MAX_INPUT_CHARS characters; keywords are escaped
    literals, for which Python's engine is linear too."""
    text = text[: saferegex.MAX_INPUT_CHARS]
    if config.get("channel") and config["channel"] != channel_id:
        return False
    if config.get("topic_id") is not None and config["topic_id"] != topic_id:
        return False
    if type == "keyword":
        if config.get("keywords"):
            return any(
                re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE)
                for word in config["keywords"]
            )
        return saferegex.search(config["regex"], text, ignore_case=True)
    pattern = config.get("pattern")
    return True if not pattern else saferegex.search(pattern, text, ignore_case=True)

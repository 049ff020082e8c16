"""The triggers' clock jobs on the leading engine loop."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from openhive.core.jobs import clock_job

from .clock import clock_pass, next_due_within
from .services import trigger_events_prune

# Fine enough for sub-second window ticks; the job runs at most once per engine tick.
CLOCK_EVERY_SECONDS = 0.1
EVENT_RETENTION = timedelta(days=2)


@clock_job("trigger-clock", every_seconds=CLOCK_EVERY_SECONDS, order=20)
def trigger_clock(now: datetime) -> dict:
    stats = clock_pass(now)
    # The loop sleeps a whole engine tick between passes; a slot or tick due within that
    # sleep is waited for precisely here instead of firing up to a tick late. Only against
    # the real clock: a test's fake `now` never makes the loop sleep.
    due = next_due_within(now, timedelta(seconds=settings.OPENHIVE["ENGINE_TICK_SECONDS"]))
    real = timezone.now()
    if due is not None and abs((real - now).total_seconds()) < 1:
        time.sleep(max(0.0, (due - real).total_seconds()))
        more = clock_pass(timezone.now())
        stats["trigger_fired"] = stats.get("trigger_fired", 0) + more.get("trigger_fired", 0)
    return {k: v for k, v in stats.items() if v}


@clock_job("trigger-event-cleanup", every_seconds=300, order=25)
def trigger_event_cleanup(now: datetime) -> dict:
    """Dedup rows only matter for a short while (a slot, a tick, a message); keep two days of
    history and no more."""
    deleted = trigger_events_prune(before=now - EVENT_RETENTION)
    return {"trigger_events_pruned": deleted} if deleted else {}

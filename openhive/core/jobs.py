"""The clock-job registry: periodic work the leading engine loop runs (trigger clock, lease
reaper, stall detector, topic idling). Apps declare jobs in their `jobs.py` with `@clock_job`;
the engine loop runs them in ascending `order`, so the sequence is written down, not implied by
import order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

JobFunc = Callable[[datetime], "dict | None"]


@dataclass(frozen=True)
class ClockJob:
    name: str
    func: JobFunc
    every_seconds: float
    order: int


_JOBS: dict[str, ClockJob] = {}


def clock_job(name: str, *, every_seconds: float, order: int):
    """Register `func(now) -> stats | None` to run on the leader about every `every_seconds`
    (at most once per engine tick), after jobs of a lower `order`."""

    def decorate(func: JobFunc) -> JobFunc:
        _JOBS[name] = ClockJob(name, func, every_seconds, order)
        return func

    return decorate


def registered_jobs() -> list[ClockJob]:
    return sorted(_JOBS.values(), key=lambda job: (job.order, job.name))

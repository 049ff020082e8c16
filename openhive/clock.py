"""The engine loop: owns the clock. One loop leads (a lease row in the database); the leader
runs the clock jobs (triggers, reaping tasks whose worker died, the stall detector) and, when
the workers are django-q2's (`qcluster`), hands them pending tasks in strict priority order.
Pull workers (`manage.py openhive worker`, as `serve` runs them) claim from the task table
themselves: a loop beside them runs with `dispatching=False`. The others wait to take over."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from openhive.core.jobs import registered_jobs
from openhive.engine.services import engine_lead, engine_resign
from tasks.selectors import dispatched_unclaimed_count, tasks_running_count, tasks_to_hand_out
from tasks.services import (
    task_mark_dispatched,
    tasks_recover_on_startup,
    tasks_release_dead_local_workers,
)

logger = logging.getLogger(__name__)


def hand_to_django_q(task_id: int, team_id: int, team_name: str) -> None:
    """A task for django-q2's workers, with its team: the worker claims it in one round trip
    on PostgreSQL (`tasks.runner.run_task`)."""
    from django_q.tasks import async_task

    async_task(
        "tasks.runner.run_task", task_id, team_id, team_name, task_name=f"openhive-task-{task_id}"
    )


class EngineLoop:
    def __init__(
        self,
        *,
        enqueue: Callable[[int, int, str], None] = hand_to_django_q,
        clock: Callable[[], datetime] = timezone.now,
        slots: int | None = None,
        dispatching: bool = True,
    ) -> None:
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Told each task's id, its team's id and its team's name.
        self.enqueue = enqueue
        self.clock = clock
        # Hand out no more tasks than workers can start, so a later critical task is not
        # stuck behind a backlog already sitting in the worker queue.
        if slots is None:
            slots = settings.OPENHIVE["DISPATCH_SLOTS"] or settings.Q_CLUSTER["workers"]
        self.slots = slots
        self.dispatching = dispatching
        self.leading = False
        self._last_run: dict[str, datetime] = {}

    def tick(self) -> dict[str, int]:
        now = self.clock()
        tick_seconds = settings.OPENHIVE["ENGINE_TICK_SECONDS"]
        leading = engine_lead(holder=self.holder, now=now, ttl_seconds=max(5.0, tick_seconds * 20))
        if leading and not self.leading:
            recovered = tasks_recover_on_startup()
            # A worker of this host that died with the last run (a crash, a kill -9 of serve)
            # hands its task back now rather than when its lease runs out.
            tasks_release_dead_local_workers()
            logger.info("engine loop %s leads (re-armed %d pending tasks)", self.holder, recovered)
        self.leading = leading
        if not leading:
            return {"dispatched": 0}
        stats = {"dispatched": self.dispatch(now) if self.dispatching else 0}
        for job in registered_jobs():
            last = self._last_run.get(job.name)
            if last is not None and (now - last).total_seconds() < job.every_seconds:
                continue
            self._last_run[job.name] = now
            try:
                stats.update(job.func(now) or {})
            except Exception:  # one failing job must not starve the others
                logger.exception("clock job %s failed", job.name)
        return stats

    def dispatch(self, now: datetime) -> int:
        busy = tasks_running_count()
        free = self.slots - busy - dispatched_unclaimed_count(now=now)
        if free <= 0:
            return 0
        sent = 0
        for task_id, team_id, team_name in tasks_to_hand_out(now=now, limit=free):
            if task_mark_dispatched(task_id=task_id, now=now):
                self.enqueue(task_id, team_id, team_name)
                sent += 1
        return sent

    def run(self, stop: threading.Event) -> None:
        tick_seconds = settings.OPENHIVE["ENGINE_TICK_SECONDS"]
        logger.info("engine loop %s started", self.holder)
        try:
            while not stop.is_set():
                try:
                    self.tick()
                except Exception:  # a bad tick (database blip) must not end the loop
                    logger.exception("engine tick failed")
                    close_old_connections()
                stop.wait(tick_seconds)
        finally:
            if self.leading:
                engine_resign(holder=self.holder)
            logger.info("engine loop %s stopped", self.holder)

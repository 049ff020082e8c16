"""A pull worker's finisher: the ends of the tasks its runners finish are written together,
one transaction (one WAL flush) for every end that arrived since the last write -- group
commit, with the durability of any other commit.

A runner hands its task's end over and waits until the batch holding it is committed, so
nothing that follows an end (the runner's return, its log line, anything `on_commit`) happens
before the end is durable. Meanwhile its worker may already claim the next task for that
slot (`bind`'s `handed_over`): claims and ends then overlap instead of taking turns, and a
team's cap stays safe, as the ended task counts as running until its end commits.

A process that dies with ends not yet written leaves those tasks running under their leases:
the reaper puts them back, as for a crash in the middle of the task. Ends that re-read their
task under a lock (bootstraps, trigger runs) keep their own transaction (`task_finish`). An
end that writes nothing but the task's row never comes here: its session wrote it with its
own end (`services.session_ends`)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime

from django.db import close_old_connections, connection, connections
from django.utils import timezone

from .models import Task
from .services import task_finish
from .services.finishes import HeldEnd, task_finish_held_alone, tasks_finish_held
from .services.queue import REREAD_ON_FINISH

logger = logging.getLogger(__name__)

_STOP = None
# Enough for every runner of a large worker; a batch never waits to fill up.
MAX_BATCH = 256
_local = threading.local()


class Finisher:
    def __init__(self, *, group: bool | None = None) -> None:
        # None: group on PostgreSQL only. SQLite commits in WAL mode without a flush
        # (synchronous=NORMAL) and has one writer at a time: a batch saves nothing there,
        # while the hop to this thread costs.
        self.group = group
        self._ends: queue.SimpleQueue[tuple[HeldEnd, Future] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="worker-finish", daemon=True)
        self.batches = 0  # written batches, for tests and benchmarks

    def start(self) -> None:
        if self.group is None:
            self.group = connection.vendor == "postgresql"
        if self.group:
            self._thread.start()

    def stop(self) -> None:
        """Write every end handed over so far, then end the thread."""
        if not self._thread.is_alive():
            return
        self._ends.put(_STOP)
        self._thread.join()

    def bind(self, handed_over: Callable[[], None] | None = None) -> None:
        """Make this (runner) thread's held-task ends go through this finisher;
        `handed_over` is called once its end is queued, before the wait for the commit."""
        _local.finisher = self
        _local.handed_over = handed_over

    def finish(
        self,
        task: Task,
        *,
        worker: str,
        status: str,
        result: str,
        stop_reason: str = "",
        now: datetime | None = None,
    ) -> Task | None:
        """`task_finish(held=task)`, written with the other ends of this moment: returns
        once committed -- the task, or None if the worker no longer held it."""
        now = now or timezone.now()
        if task.type in REREAD_ON_FINISH or not self._thread.is_alive():
            return task_finish(task_id=task.pk, worker=worker, status=status, result=result,
                               now=now, stop_reason=stop_reason, held=task)  # fmt: skip
        done: Future[Task | None] = Future()
        self._ends.put((HeldEnd(task, worker, status, result, stop_reason, now), done))
        handed_over = getattr(_local, "handed_over", None)
        if handed_over is not None:
            handed_over()
        return done.result()

    def _run(self) -> None:
        try:
            while True:
                first = self._ends.get()
                batch = [first] if first is not _STOP else []
                stopping = first is _STOP
                # Everything already waiting joins: no timer, the wait is the last write's.
                while not stopping and len(batch) < MAX_BATCH:
                    try:
                        item = self._ends.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stopping = True
                    else:
                        batch.append(item)
                if batch:
                    self._write([item for item in batch if item is not None])
                if stopping:
                    return
        finally:
            connections.close_all()

    def _write(self, batch: list[tuple[HeldEnd, Future]]) -> None:
        try:
            finished = tasks_finish_held([end for end, _done in batch])
        except Exception:  # one bad end must not fail the others: each alone
            logger.warning("a batch of %d task ends failed; writing them one by one",
                           len(batch), exc_info=True)  # fmt: skip
            close_old_connections()
            for end, done in batch:
                try:
                    done.set_result(task_finish_held_alone(end))
                except Exception as exc:  # the runner sees it, as from `task_finish`
                    done.set_exception(exc)
            return
        self.batches += 1
        for (_end, done), task in zip(batch, finished, strict=True):
            done.set_result(task)


def current_finisher() -> Finisher | None:
    """The finisher this thread's held-task ends go through, if any."""
    return getattr(_local, "finisher", None)

"""A pull worker process: one claimer thread takes batches of tasks straight from the task
table (no broker hop) and hands them to N runner threads.

The claimer asks for no more tasks than there are idle runners, so a claimed task starts at
once and never waits behind another one in this process (which would hold a team's slot, or
the head of the queue, away from other workers). When the queue is empty it sleeps until a
wake-up (`tasks.wake`) or its poll interval; after a task ends it looks again at once. On
stop, claims no runner has started yet go straight back to the queue.

A task's end that writes nothing but its row commits with its session's end
(`services.session_ends`). The other ends go to the worker's finisher (`tasks.finisher`),
which writes those of the moment in one transaction. A runner waiting there for the commit
gives its slot up: the claimer fills it while the end is written. Twice as many runner
threads as slots let a full set of tasks run while the previous set's ends commit."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connections

from .finisher import Finisher
from .models import Task
from .services import task_hand_back
from .services.claims import batch_owner, task_claim_batch
from .wake import Waker

logger = logging.getLogger(__name__)

# `execute(task, lease_owner)` runs a claimed task to its end and returns its final status.
Execute = Callable[[Task, str], str]
_STOP = None
FIRST_BACKOFF = 0.002
COALESCE_SECONDS = 0.001


class PullWorker:
    def __init__(
        self,
        *,
        threads: int,
        execute: Execute,
        poll: float = 0.2,
        stop: threading.Event | None = None,
        on_done: Callable[[Task, str, float], None] | None = None,
        group_ends: bool | None = None,
    ) -> None:
        self.threads = max(1, threads)
        self.execute = execute
        self.poll = poll
        self.stop = stop or threading.Event()
        self.on_done = on_done
        self.wake = threading.Event()
        self.last_work = time.monotonic()
        self._handoff: queue.SimpleQueue[tuple[Task, str] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = self.threads  # slots not running a task nor holding one handed over
        self._waiting = 0  # runners waiting for their end's commit, their slot given up
        self._released = threading.local()
        self._runners: list[threading.Thread] = []
        self._claimer: threading.Thread | None = None
        self._waker: Waker | None = None
        # The runners' task ends, written together (group commit): see `tasks.finisher`.
        self.finisher = Finisher(group=group_ends)

    @property
    def busy(self) -> int:
        with self._lock:
            return self.threads - self._idle

    def start(self) -> None:
        self._waker = Waker(self.wake, self.stop)
        self._waker.start()
        self.finisher.start()
        self._runners = [
            threading.Thread(target=self._run, name=f"worker-{i}") for i in range(2 * self.threads)
        ]
        for thread in self._runners:
            thread.start()
        self._claimer = threading.Thread(target=self._claim_loop, name="worker-claim")
        self._claimer.start()

    def join(self) -> None:
        """Wait for the claimer and the runners after `stop` was set: each runner finishes
        the task it is running; claims not started yet are handed back."""
        if self._claimer is not None:
            self._claimer.join()
        for _ in self._runners:
            self._handoff.put(_STOP)
        for thread in self._runners:
            thread.join()
        self.finisher.stop()  # after the runners: every end they handed over is written
        if self._waker is not None:
            self._waker.thread.join(timeout=2)

    # --- the claimer ---------------------------------------------------------------------

    def _claim_loop(self) -> None:
        # After an empty claim the next look comes soon, then less and less often up to
        # `poll`: teams skipped because another worker was claiming for them get looked at
        # again quickly, while an idle worker costs a query every `poll` at most.
        backoff = FIRST_BACKOFF
        try:
            while not self.stop.is_set():
                with self._lock:
                    free = self._idle
                if free <= 0:
                    self.wake.wait(self.poll)  # a runner freeing up sets it
                    self.wake.clear()
                    continue
                if free < self.threads:
                    # Runners that end together claim together: a moment's wait lets the
                    # others finishing now join the batch (one claim for many tasks).
                    time.sleep(COALESCE_SECONDS)
                    with self._lock:
                        free = self._idle
                claimed = self._claim(free)
                if not claimed:
                    self.wake.wait(min(backoff, self.poll))
                    self.wake.clear()
                    backoff *= 2
                    continue
                backoff = FIRST_BACKOFF
                owner, tasks = claimed
                with self._lock:
                    self._idle -= len(tasks)
                for task in tasks:
                    self._handoff.put((task, owner))
                if self.stop.is_set():
                    break
        finally:
            self._hand_back_unstarted()
            connections.close_all()

    def _claim(self, free: int) -> tuple[str, list[Task]] | None:
        owner = batch_owner()
        try:
            tasks = task_claim_batch(worker=owner, limit=free)
        except Exception:  # a database blip: whatever this batch may hold goes back
            logger.exception("worker claim failed")
            close_old_connections()
            _release_owner(owner)
            return None
        return (owner, tasks) if tasks else None

    def _hand_back_unstarted(self) -> None:
        """Claims waiting in the hand-off when the worker stops: pending again at once."""
        kept: list[tuple[Task, str] | None] = []
        while True:
            try:
                item = self._handoff.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                kept.append(item)
                continue
            task, owner = item
            with self._lock:
                self._idle += 1
            try:
                task_hand_back(task_id=task.pk, worker=owner, reason="worker stopped")
            except Exception:  # its lease runs out and the reaper hands it back
                logger.exception("task %s could not be handed back", task.pk)
        for item in kept:
            self._handoff.put(item)

    # --- the runners ---------------------------------------------------------------------

    def _handed_over(self) -> None:
        """This runner's end is queued for the commit: its slot is free for the next claim,
        unless a full set of runners is already waiting (no thread would be left to run
        what the claimer takes)."""
        with self._lock:
            if self._waiting >= self.threads:
                return
            self._waiting += 1
            self._idle += 1
        self._released.slot = True
        self.wake.set()

    def _run(self) -> None:
        self.finisher.bind(self._handed_over)
        self._released.slot = False
        try:
            while True:
                item = self._handoff.get()
                if item is _STOP:
                    return
                task, owner = item
                if self.stop.is_set():
                    # Stopping: not started, so not run; back to the queue at once.
                    self._give_back(task, owner)
                    continue
                started = time.monotonic()
                try:
                    status = self.execute(task, owner)
                except Exception:  # `execute` records failures itself; never lose a runner
                    logger.exception("task %s: worker crashed", task.pk)
                    close_old_connections()
                    status = "error"
                finally:
                    self.last_work = time.monotonic()
                    with self._lock:
                        if self._released.slot:
                            self._waiting -= 1
                        else:
                            self._idle += 1
                    self._released.slot = False
                    self.wake.set()
                if self.on_done is not None:
                    self.on_done(task, status, time.monotonic() - started)
        finally:
            connections.close_all()

    def _give_back(self, task: Task, owner: str) -> None:
        try:
            task_hand_back(task_id=task.pk, worker=owner, reason="worker stopped")
        except Exception:
            logger.exception("task %s could not be handed back", task.pk)
        with self._lock:
            self._idle += 1


def _release_owner(owner: str) -> None:
    """A claim whose commit reached the database but whose reply was lost leaves tasks
    running under `owner` that nobody runs: they go straight back."""
    try:
        for task_id in Task.objects.filter(
            status=Task.Status.RUNNING, lease_owner=owner
        ).values_list("id", flat=True):
            task_hand_back(task_id=task_id, worker=owner, reason="claim reply lost with the link")
    except Exception:  # still down: the leases run out and the reaper hands them back
        logger.warning("claims of %s not released; their leases will expire", owner)
        close_old_connections()

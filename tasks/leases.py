"""Lease renewal for the tasks this process runs: one keeper thread for all of them.

A running task's lease is renewed every third of OPENHIVE_LEASE_SECONDS while its session runs.
That used to be a thread per task, started and joined around every run: on a queue of quick
tasks the start and the join cost more than the renewals themselves, which a quick task never
needs. Here each run registers its task, the keeper renews what is due, and a run that ends
deregisters without waiting for any thread."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator

from django.conf import settings
from django.db import close_old_connections, connections

from openhive.core.db import RESET_ERRORS

from .services import task_renew_lease

logger = logging.getLogger(__name__)

_lock = threading.Condition()
_held: dict[int, tuple[int, str]] = {}  # registration → (task id, worker)
_due: list[tuple[float, int]] = []  # (when, registration), a heap
_numbers = itertools.count(1)
_keeper: tuple[int, threading.Thread] | None = None  # (pid, thread): none survives a fork
# A wake renews what is due within interval / SLACK_DIVISOR of it (see `_keep`).
SLACK_DIVISOR = 4
wakes = 0  # the keeper's wake-ups, for tests and benchmarks


@contextlib.contextmanager
def renewed(task_id: int, worker: str) -> Iterator[None]:
    """Keep the task's lease renewed while the block runs."""
    number = next(_numbers)
    with _lock:
        _held[number] = (task_id, worker)
        heapq.heappush(_due, (time.monotonic() + _interval(), number))
        _ensure_keeper()
        # Woken only when this renewal is due before any it already waits for: waking it for
        # every task made it take the GIL from the task's thread on every claim.
        if _due[0][1] == number:
            _lock.notify()
    try:
        yield
    finally:
        with _lock:
            _held.pop(number, None)  # its heap entry is dropped when it comes due


def _interval() -> float:
    return max(1.0, settings.OPENHIVE["LEASE_SECONDS"] / 3)


def _ensure_keeper() -> None:
    global _keeper
    if _keeper is not None and _keeper[0] == os.getpid() and _keeper[1].is_alive():
        return
    thread = threading.Thread(target=_keep, name="lease-keeper", daemon=True)
    _keeper = (os.getpid(), thread)
    thread.start()


def _keep() -> None:
    global wakes
    while True:
        with _lock:
            while not _due or _due[0][0] > time.monotonic():
                _lock.wait(timeout=_due[0][0] - time.monotonic() if _due else None)
            wakes += 1
            # Everything due within the slack is taken at this wake: the entries of runs that
            # ended (each left one behind, due an interval after it began) are dropped together
            # instead of waking this thread once per finished task -- on a queue of quick tasks
            # that was a wake, and a take of the GIL from a running session, per task. A lease
            # renewed a little early is only a little longer.
            horizon = time.monotonic() + _interval() / SLACK_DIVISOR
            due: list[tuple[int, tuple[int, str]]] = []
            while _due and _due[0][0] <= horizon:
                _when, number = heapq.heappop(_due)
                held = _held.get(number)
                if held is not None:
                    due.append((number, held))
            idle = not due and not _held
        if idle:
            # No lease left to renew: the connection a renewal opened is not kept idle for the
            # next long task (it would hold a server slot, and keep its database from being
            # dropped). Quick tasks never reach a renewal, so this costs them nothing.
            connections.close_all()
        for number, held in due:
            if _renew(*held):
                with _lock:
                    if number in _held:
                        heapq.heappush(_due, (time.monotonic() + _interval(), number))
            else:
                with _lock:
                    _held.pop(number, None)  # lost (cancelled, reaped): its session stops itself


def _renew(task_id: int, worker: str) -> bool:
    try:
        return task_renew_lease(task_id=task_id, worker=worker)
    except RESET_ERRORS:  # still down after the reconnects: try at the next beat
        logger.warning("lease of task %s not renewed: database unavailable", task_id)
        close_old_connections()
        return True
    except Exception:
        logger.exception("lease of task %s not renewed", task_id)
        return True

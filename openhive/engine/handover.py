"""A session's loop handed over to a pooled thread once, and watched from the caller's thread.

A session that can be cancelled or time out must be able to give up on a model call that does
not return. The loop makes its model calls inline, on its own thread; the caller waits, and
while the loop waits for a reply it reads the stop conditions every CANCEL_POLL_SECONDS. When
one is met, the caller abandons the loop and ends the session; the loop's thread unwinds,
touching nothing, once its call returns.

Why not hand each model call to a thread instead: every hand-off costs two wake-ups across
CPUs, and on a loaded 2-core machine that was 0.2 to 1.5 ms per step, more than the engine's own
work. Here the cost is paid once per session.

The caller's database connections are lent to the loop's thread, so that the session's writes
stay in the caller's transaction, as they did when the loop ran on the caller's thread. The two
threads never use them at once: the caller reads the stop conditions only while the loop is in
a model call (which uses no database), under the lock the loop takes to leave the call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from django.db import connections

from . import callpool

T = TypeVar("T")


class Abandoned(BaseException):
    """Raised on the loop's thread when its call returns after the caller gave up on it.
    A BaseException: no `except Exception` on the way up may record anything."""


class Watch:
    """Whether the loop is inside a model call, and whether the caller has given up on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_call = False
        self._abandoned = False

    def model_call(self) -> Watch:
        """Around a model call, on the loop's thread: `with watch.model_call(): ...` (the
        watch is its own context manager, one call at a time: a generator's cost, twice a
        step, was measurable on quick steps)."""
        return self

    def __enter__(self) -> None:
        with self._lock:
            if self._abandoned:
                raise Abandoned
            self._in_call = True

    def __exit__(self, *_exc: object) -> None:
        with self._lock:
            self._in_call = False
            if self._abandoned:
                raise Abandoned  # the reply (or the error) is nobody's any more

    def check_during_call(self, check: Callable[[], None]) -> None:
        """On the caller's thread: run `check` if the loop waits for a model reply; if it
        raises, the loop is abandoned and the error goes on up."""
        with self._lock:
            if not self._in_call:
                return
            try:
                check()
            except BaseException:
                self._abandoned = True
                raise

    def abandon(self) -> bool:
        """Give up on the loop; True if it is in a model call (it touches nothing more)."""
        with self._lock:
            self._abandoned = True
            return self._in_call


class _Outcome(Generic[T]):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None


def run_watched(
    loop: Callable[[], T], watch: Watch, *, poll: float, check: Callable[[], None]
) -> T:
    """Run `loop` on a pooled thread with this thread's connections, and wait for it; every
    `poll` seconds while it is in a model call, run `check` (see `Watch.check_during_call`).
    Returns what `loop` returns and raises what it raises."""
    lent = [(alias, connections[alias]) for alias in connections]
    for _alias, conn in lent:
        conn.inc_thread_sharing()
    outcome: _Outcome[T] = _Outcome()

    def job() -> None:
        # Every job ends with this thread's own connections closed: none is replaced here.
        for alias, conn in lent:
            connections[alias] = conn
        try:
            outcome.value = loop()
        except Abandoned:
            pass
        except BaseException as exc:  # raised again on the caller's thread
            outcome.error = exc
        finally:
            for alias, _conn in lent:
                del connections[alias]
            connections.close_all()  # any of this thread's own
            outcome.done.set()

    try:
        # The loop runs in a copy of this context: its spans, log lines and lineage are the
        # session's.
        callpool.submit(job)
        _wait(outcome, watch, poll, check)
    finally:
        for _alias, conn in lent:
            conn.dec_thread_sharing()
    if outcome.error is not None:
        raise outcome.error
    return outcome.value  # type: ignore[return-value]


def _wait(outcome: _Outcome, watch: Watch, poll: float, check: Callable[[], None]) -> None:
    try:
        while not outcome.done.wait(poll):
            watch.check_during_call(check)
    except BaseException:
        # Told to stop (a cancel, a timeout, or the process itself): a loop in the middle of a
        # step is left to reach its next model call, where it stops, so that nothing uses the
        # connections twice at once.
        if not watch.abandon():
            outcome.done.wait()
        raise

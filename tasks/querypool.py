"""Threads for query fan-outs that outlive one fan-out, each keeping its database connection.

A fan-out used to start a thread per child and close its connection at the end: on PostgreSQL
every child then paid a new connection, and a new server backend whose caches are cold, before
its first query (about 0.15-0.2 s of a 5-child fan-out). A thread that ran a child now waits
`QUERY_THREAD_IDLE_SECONDS` for the next one with its connection open, then closes it and ends.
A fan-out never waits for a thread: it takes idle ones and starts new ones for the rest, so
nested and concurrent fan-outs run at once as before."""

from __future__ import annotations

import atexit
import contextvars
import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from django.conf import settings
from django.db import connections

from openhive.core.db import keep_connection_if_sound

_Job = Callable[[], None] | None  # None: end now

_lock = threading.Lock()
_idle: list[_Thread] = []
_names = itertools.count(1)


def run_parallel(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run each call in a thread of its own, in a copy of the caller's context; their results
    (or exceptions) in order."""
    futures: list[Future] = []
    for call in calls:
        future: Future = Future()
        context = contextvars.copy_context()
        futures.append(future)
        _take().jobs.put(
            lambda call=call, context=context, future=future: _run(call, context, future)
        )
    return [future.result() for future in futures]


def _run(call: Callable[[], Any], context: contextvars.Context, future: Future) -> None:
    try:
        future.set_result(context.run(call))
    except BaseException as exc:  # handed to the caller, who re-raises it
        future.set_exception(exc)


def _take() -> _Thread:
    with _lock:
        if _idle:
            return _idle.pop()
    return _Thread()


def shutdown() -> None:
    """End every idle thread now, closing its connections (tests, interpreter exit)."""
    with _lock:
        idle = list(_idle)
        _idle.clear()
    for thread in idle:
        thread.jobs.put(None)
    for thread in idle:
        thread.thread.join(timeout=5)


atexit.register(shutdown)


def _idle_seconds() -> float:
    return float(settings.OPENHIVE.get("QUERY_THREAD_IDLE_SECONDS", 0))


def _tidy_connections() -> None:
    """Keep a connection only in a clean state: a child's failure may leave one mid-transaction
    or broken, and the next child must not inherit that."""
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:  # a child left an atomic block open: nobody will close it
            conn.close()
        else:
            keep_connection_if_sound(conn.alias)


class _Thread:
    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=self._serve, name=f"query-{next(_names)}", daemon=True
        )
        self.thread.start()

    def _serve(self) -> None:
        try:
            job = self.jobs.get()
            while job is not None:
                job()
                keep = _idle_seconds()
                if keep <= 0:
                    return
                _tidy_connections()
                with _lock:
                    _idle.append(self)
                try:
                    job = self.jobs.get(timeout=keep)
                except queue.Empty:
                    with _lock:
                        if self in _idle:
                            _idle.remove(self)
                            return
                    job = self.jobs.get()  # taken just as it timed out: its job is on the way
        finally:
            connections.close_all()  # this thread's own connections

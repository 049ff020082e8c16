"""Threads for session loops that their caller may abandon (a cancel, a timeout: see
`handover`), reused from session to session instead of one new thread each. Daemon threads, so
a model call that hangs never holds up a worker's exit; a pool with no idle thread grows by
one, as a new thread per session would."""

from __future__ import annotations

import contextvars
import os
import queue
import threading
from collections.abc import Callable

_jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_lock = threading.Lock()
_idle = 0


def submit(job: Callable[[], None]) -> None:
    """Run `job` on a pooled thread, in a copy of the caller's context (its spans, log
    context and lineage)."""
    global _idle
    context = contextvars.copy_context()
    with _lock:
        reuse = _idle > 0
        if reuse:
            _idle -= 1
    if not reuse:
        threading.Thread(target=_serve, name="session-loop", daemon=True).start()
    _jobs.put(lambda: context.run(job))


def _serve() -> None:
    global _idle
    while True:
        job = _jobs.get()
        try:
            job()
        except BaseException:  # a job reports its own outcome; the thread stays for the next
            pass
        finally:
            with _lock:
                _idle += 1


def _forget_threads() -> None:
    """In a forked child (django-q2 forks its workers): none of the parent's threads came
    along, so none of them is idle here."""
    global _jobs, _lock, _idle
    _jobs, _lock, _idle = queue.SimpleQueue(), threading.Lock(), 0


os.register_at_fork(after_in_child=_forget_threads)

"""Keeping a hand-over between two threads on one CPU core.

When a thread wakes another and then waits for it, Linux puts the woken thread on an idle
core, not on the waker's (busy at that moment). A session's loop handed to a pooled thread
(`openhive.engine.handover`) therefore ran on the other core, and its caller woke on the first
one again when the loop ended: the session's working set (litellm's tables, the history, the
rows it writes) moved between the cores' caches twice a session, and the idle core first had to
be woken. On the 2-core VM that was 2-4 ms of CPU a session of 11 quick model calls, about a
fifth of its time; pinned to one core (`taskset -c 1`) the handed-over loop cost what the same
loop cost on its caller's thread.

`move_to(cpu)` puts the calling thread on `cpu` at once: its affinity narrowed to that core,
which migrates it there, then widened again to what it was, so the scheduler stays free to
move it later (a core taken by another process) and nothing stays pinned. Where the calls are
missing (not Linux) or refused (a CPU set changed under us), it does nothing."""

from __future__ import annotations

import ctypes
import logging
import os

logger = logging.getLogger(__name__)


def _load_getcpu():
    try:
        getcpu = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (AttributeError, OSError):
        return None
    getcpu.restype = ctypes.c_int
    getcpu.argtypes = []
    return getcpu


_getcpu = _load_getcpu() if hasattr(os, "sched_setaffinity") else None
_enabled = [_getcpu is not None]


def current_cpu() -> int | None:
    """The core this thread runs on now; None where it cannot be told."""
    if not _enabled[0]:
        return None
    cpu = _getcpu()
    return cpu if cpu >= 0 else None


def move_to(cpu: int | None) -> None:
    """Run the calling thread on `cpu` from now on (see the module's note); no-op for None or
    when already there."""
    if cpu is None or not _enabled[0] or _getcpu() == cpu:
        return
    try:
        allowed = os.sched_getaffinity(0)
        if cpu not in allowed:
            return
        os.sched_setaffinity(0, {cpu})
        os.sched_setaffinity(0, allowed)
    except OSError as exc:  # e.g. a cpuset changed by the container runtime: stop trying
        _enabled[0] = False
        logger.debug("threads are not moved between cores any more: %s", exc)

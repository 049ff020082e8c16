"""Keeping the cyclic garbage collector's pauses out of the web process's acks.

A full (generation 2) collection visits every object the collector tracks. A process that has
loaded Django, its apps and litellm tracks about 390,000 objects that live as long as it does
(modules, classes, functions, litellm's tables). Walking them took 280-350 ms in the web
process during a 500-socket burst, four times in a two-second run, and every ack pending
meanwhile waited: the burst's slowest acks were those pauses. `gc.freeze()` moves the objects
alive now to a permanent generation that collections skip; reference counting still frees
them, and what the process creates later is collected as before.

Young collections paused a burst's acks too. CPython runs one every 700 new container
objects, and a burst of 500 chat messages keeps its sockets' frames, futures and messages
alive: each collection walked them and moved them on, and the middle generation's, after ten
young ones, walked them again. 13-15 young or middle collections (17-25 ms in all) fell inside
a burst's first round of acks (benchmarks/chat_sockets.py prints them). `pause_collections`
turns automatic collection off while a burst is acked (openhive.chat.admit); what the burst
left behind is collected at the first allocation after. Collecting less often instead (a young
threshold of 50,000) made each pause longer: middle collections of 90-250 ms.

Start-up too: loading Django and the apps creates only objects that live as long as the
process (modules, classes, functions), so the collector finds nothing to free, yet it ran 280
young, 25 middle and 2 full collections during a `manage.py check`, about 0.3 s of its 1.9 s
(2-core VM). The entry points call `quiet_start` before they import Django; the last app's
ready() calls `start_done`, which freezes what was loaded and turns collection back on (the web
server calls it too once it listens, for an application that loads no apps). The
few thousand unreachable objects start-up leaves (about 2,900 of 158,000) are frozen with the
rest: about 1.4 MB more RSS, once, rather than a 0.16 s full collection at every start."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections.abc import Iterator

_quiet_start = [False]


def quiet_start() -> None:
    """No automatic collection until `start_done` (the apps loaded). For a process's entry
    point, before it imports Django."""
    if gc.isenabled():
        gc.disable()
        _quiet_start[0] = True


def start_done() -> None:
    """Called once the apps are loaded: if `quiet_start` turned collection off, what start-up
    loaded is frozen and collection comes back on. Every process that loads the apps passes
    here, so none runs on without collections."""
    if _quiet_start[0]:
        _quiet_start[0] = False
        gc.freeze()
        gc.enable()


def freeze_long_lived() -> None:
    """Call once the process has loaded what it keeps: after start-up, after a big import."""
    gc.freeze()


@contextlib.contextmanager
def loading_long_lived() -> Iterator[None]:
    """Around a big import made after start-up (litellm's: 4.5-5.3 s on the 2-core VM), whose
    objects live as long as the process: no automatic collection while it runs, as at
    start-up (about 1 s of that import), and what it loaded is frozen at the end. Collection
    comes back on only if it was on before (a chat burst's pause may hold it off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class CollectionPause:
    """Automatic collections off from `pause_collections` until `end()` or until `seconds`
    have passed, whichever comes first. The bound is kept by a thread, not the caller's event
    loop: a caller that never ends its pause (its loop closed first) cannot leave the process
    without collections."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.ended = False

    def end(self) -> None:
        with _pause_lock:
            if self.ended:
                return
            self.ended = True
            _pauses.discard(self)
            if not _pauses and _enabled_before:
                gc.enable()


_pause_lock = threading.Lock()
_bounds_changed = threading.Condition(_pause_lock)
_pauses: set[CollectionPause] = set()
_enabled_before = True
_keeper: list[threading.Thread] = []  # the one thread that ends pauses at their bound


def pause_collections(seconds: float) -> CollectionPause:
    """Turn automatic collection off (process-wide) for at most `seconds`; pauses overlap,
    and collection comes back on when the last ends, unless it was off before the first.

    The bounds are kept by one thread for the process's life (`start_pause_keeper`). A
    thread of its own per pause (a `threading.Timer`) was started on the event loop at a
    burst's second message, and `Thread.start` waits until the new thread has run: with the
    admit thread writing the burst's first batch, the loop waited for the GIL to go there and
    back, up to two switch intervals, while every ack of the burst waited behind it."""
    global _enabled_before
    pause = CollectionPause(seconds)
    with _pause_lock:
        if not _pauses:
            _enabled_before = gc.isenabled()
        _pauses.add(pause)
        gc.disable()  # even if something turned it on during another pause
        _bounds_changed.notify()
    start_pause_keeper()
    return pause


def start_pause_keeper() -> None:
    """Start the thread that ends pauses at their bound, if it is not running yet. A server
    calls it as it starts listening, so that not even its first burst waits for it."""
    with _pause_lock:
        if _keeper:
            return
        keeper = threading.Thread(target=_keep_bounds, name="collection-pause", daemon=True)
        _keeper.append(keeper)
    keeper.start()


def _keep_bounds() -> None:
    while True:
        with _pause_lock:
            now = time.monotonic()
            overdue = [pause for pause in _pauses if pause.deadline <= now]
            if not overdue:
                soonest = min((pause.deadline for pause in _pauses), default=None)
                _bounds_changed.wait(None if soonest is None else soonest - now)
                continue
        for pause in overdue:
            pause.end()


def _forget_keeper() -> None:
    """In a forked child the keeper did not come along, so nothing would end the pauses it
    inherited: they end here (the child is not acking its parent's burst), and its own first
    pause starts another keeper."""
    global _pause_lock, _bounds_changed
    _pause_lock = threading.Lock()
    _bounds_changed = threading.Condition(_pause_lock)
    _keeper.clear()
    if _pauses:
        _pauses.clear()
        if _enabled_before:
            gc.enable()


os.register_at_fork(after_in_child=_forget_keeper)

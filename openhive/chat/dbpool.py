"""Database calls of the chat socket, on threads of their own that keep their connections.

Channels' `database_sync_to_async` closes the connection after every call when CONN_MAX_AGE is
0 (the default), so each ack would open a new database connection (a PostgreSQL backend, or a
SQLite file with its PRAGMAs). These threads keep theirs and drop one only when it broke. Turns
have their own threads, so an ack never waits behind a running turn."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import SyncToAsync
from django.conf import settings
from django.db import DatabaseError, connection, connections

from openhive.core.db import keep_connection_if_sound, reconnecting

_DB_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="chat-db")
# Admissions (gate + store, before the ack) have a thread of their own: batched writes one at a
# time, never queued behind an outbox delivery or a topic list.
ADMIT_THREAD = "chat-admit"
_ADMIT_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix=ADMIT_THREAD)
_TURN_POOL = ThreadPoolExecutor(
    max_workers=settings.OPENHIVE["CHAT_TURN_THREADS"], thread_name_prefix="chat-turn"
)


def _keeping_connection(func: Callable[..., Any]) -> Callable[..., Any]:
    """No ping before each call (a round trip each: on PostgreSQL, a burst's topic lists,
    interceptions and outbox reads spent as long in `SELECT 1` as in their own queries). The
    database is asked only after an error on the connection, as a worker does between
    tasks; one cut while the thread idled (a restart, a failover) fails the call's first
    statement, and `reconnecting` runs it again on a new connection."""
    retrying = reconnecting(func)

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        keep_connection_if_sound()
        try:
            return retrying(*args, **kwargs)
        except DatabaseError:
            connection.close()  # a fresh one next time
            raise

    return run


# The wrappers are made once per function: building a SyncToAsync (and its functools.wraps)
# for every call was a visible part of the event loop's work per message in a burst.
@functools.lru_cache(maxsize=256)
def db(func: Callable[..., Any]) -> SyncToAsync:
    """`await db(f)(...)`: run f on a chat database thread."""
    return SyncToAsync(_keeping_connection(func), thread_sensitive=False, executor=_DB_POOL)


@functools.lru_cache(maxsize=256)
def on_admit_thread(func: Callable[..., Any]) -> SyncToAsync:
    return SyncToAsync(_keeping_connection(func), thread_sensitive=False, executor=_ADMIT_POOL)


@functools.lru_cache(maxsize=256)
def on_turn_thread(func: Callable[..., Any]) -> SyncToAsync:
    return SyncToAsync(func, thread_sensitive=False, executor=_TURN_POOL)


def start_on_admit_thread(func: Callable[..., Any], *args: Any) -> None:
    """Run `func(*args)` on the admit thread, handed straight to it: not through the event
    loop, which in a burst gets to a coroutine's next step only after every frame read before
    it. `func` reports its own outcome."""
    _ADMIT_POOL.submit(func, *args)


def running_on_admit_thread() -> bool:
    return threading.current_thread().name.startswith(ADMIT_THREAD)


def close_db_connections() -> None:
    """Close the connections every chat database thread holds (tests, before the test
    database is dropped)."""
    workers = _DB_POOL._max_workers
    barrier = threading.Barrier(workers)

    def close(_: int) -> None:
        barrier.wait(timeout=10)  # one call per thread: each waits until all threads have one
        connections.close_all()

    list(_DB_POOL.map(close, range(workers)))
    _ADMIT_POOL.submit(connections.close_all).result(timeout=10)

"""Surviving a lost database connection: a failover, a server restart or `pg_terminate_backend`
must not crash the session that happened to be using the connection.

`reconnecting` wraps a unit of work that opens its own transaction (or runs in autocommit):
when the connection turns out to be dead, it is closed (Django opens a new one on the next
query) and the work is tried again. Inside a caller's transaction nothing is retried: the
transaction is lost with the connection, so only its owner can decide."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    InterfaceError,
    OperationalError,
    connection,
    connections,
    models,
)

from openhive.core.rows import has_save_receivers, insert_instances

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

RESET_ERRORS = (OperationalError, InterfaceError)
# PostgreSQL, for the current transaction only: its commit does not wait for the WAL to reach
# the disk (see the callers for what each trades, and why it is safe there).
NO_FLUSH_WAIT = "SELECT set_config('synchronous_commit', 'off', true)"
# The same as a statement that answers no rows, for a query of several whose results are read
# in turn (`compiled.to_rows` steps over it).
NO_FLUSH_WAIT_SET = "SET LOCAL synchronous_commit = off"
_local = threading.local()
ATTEMPTS = 4
BACKOFF_SECONDS = (0.05, 0.2, 0.8)


def may_skip_flush_wait() -> bool:
    """Whether a task's claim or a session's own rows may commit without waiting for
    PostgreSQL's WAL flush (one fsync, several ms on many disks: more than a quick model step).
    The WAL is one sequence: the next commit that waits -- the task's end, the chat reply
    stored, an enqueue -- makes every write before it durable too. Only a crash of the
    database server in between can lose them, and then the work they record has no recorded
    end either: a lost claim leaves its task pending, to be claimed again, and the worker that
    held it finds its next write or cancel check refused, as when the reaper takes back a
    lease. OPENHIVE_SESSION_SYNC_COMMIT makes them all wait. Inside a caller's transaction the
    commit is the caller's."""
    return (
        connection.vendor == "postgresql"
        and not settings.OPENHIVE["SESSION_SYNC_COMMIT"]
        and not connection.in_atomic_block
    )


def connection_lost(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """True when the connection can no longer be used (SQLite's never is: a locked database
    is an OperationalError too, but not one that a new connection would cure)."""
    conn = connections[alias]
    if conn.connection is None:
        # Closed already: Django closes a connection whose rollback failed on the way out of
        # an atomic block, which is how a cut connection usually surfaces.
        return True
    try:
        return not conn.is_usable()
    except Exception:
        return True


def reconnects() -> int:
    """How many times this thread has reconnected: compare before and after a unit of work to
    learn that it may have committed without hearing so (the reply was lost with the link)."""
    return getattr(_local, "reconnects", 0)


def is_reset(exc: BaseException, alias: str = DEFAULT_DB_ALIAS) -> bool:
    """The error says the server connection broke (PostgreSQL: SQLSTATE class 08, an
    administrator's or the server's shutdown, or a client-side failure with no SQLSTATE).
    Needed beside `connection_lost`: leaving an atomic block, Django may already have
    replaced the broken connection with a fresh one."""
    if connections[alias].vendor != "postgresql":
        return False
    cause = exc.__cause__ or exc
    state = getattr(cause, "sqlstate", None)
    if state is None:
        return type(cause).__name__ in ("OperationalError", "InterfaceError")
    return state.startswith("08") or state in ("57P01", "57P02", "57P03")


def reconnecting(func: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        conn = connections[DEFAULT_DB_ALIAS]
        for attempt in range(ATTEMPTS):
            try:
                return func(*args, **kwargs)
            except RESET_ERRORS as exc:
                last = attempt == ATTEMPTS - 1
                if last or conn.in_atomic_block or not (connection_lost() or is_reset(exc)):
                    raise
                logger.warning(
                    "database connection lost in %s (%s); reconnecting",
                    func.__qualname__,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                )
                _local.reconnects = reconnects() + 1
                with contextlib.suppress(Exception):
                    conn.close()
                time.sleep(BACKOFF_SECONDS[attempt])
        raise AssertionError("unreachable")

    return run


def keep_connection_if_sound(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Between two units of work on one thread (a worker's tasks): keep this thread's
    connection unless it is broken or was left outside autocommit. `close_old_connections`
    closes it every time while CONN_MAX_AGE is 0, and on PostgreSQL a new connection costs a
    server process's start for each task. The database is only asked (one ping) when an error
    was seen on the connection, as Django itself does."""
    conn = connections[alias]
    if conn.connection is None or conn.in_atomic_block:
        return
    try:
        sound = conn.get_autocommit() and (not conn.errors_occurred or conn.is_usable())
    except Exception:
        sound = False
    if sound:
        conn.errors_occurred = False
    else:
        with contextlib.suppress(Exception):
            conn.close()


def statements_in_one_query() -> bool:
    """PostgreSQL with client-side binding (Django's default) takes several statements with
    parameters in one query, run as one transaction (or as part of the caller's); with
    server-side binding a query holds one statement."""
    return connection.vendor == "postgresql" and not connection.settings_dict["OPTIONS"].get(
        "server_side_binding"
    )


def insert_after(statement: str, instance: models.Model) -> bool:
    """INSERT a new row as `save()` would store it, sent in one query after `statement` (no
    parameters, no result rows): one round trip where a transaction of both took four (BEGIN,
    each statement, COMMIT). Only where `statements_in_one_query()`. False, and nothing sent,
    when the model has save signal receivers (which only `save()` calls): the caller saves it
    instead."""
    if has_save_receivers(type(instance)):
        return False
    insert_instances([instance], after=(statement, []))
    return True

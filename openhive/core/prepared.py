"""PostgreSQL: the statements every enqueue, claim, session start, step and task end runs,
planned once per connection instead of at every run (a pull worker's batch claim forces their
generic plans and keeps them on the indexes: `tasks.services.claims.IN_INDEX_ORDER`).

On these statements the server spent more time planning than executing (the claim's UPDATE:
0.16-0.31 ms planning against 0.04-0.06 ms executing; a session start's reads: 0.33 ms
against 0.17). A statement passed through `prepared()` is sent, on a connection that has run it
a few times, as `EXECUTE` of a statement `PREPARE`d on that connection, which the server plans
once (its generic plan, after a few custom ones). They are SQL-level statements, not the wire
protocol's, so they still travel with others in one query of several statements (client-side
binding, `statements_in_one_query`), and take the same parameters in the same order.

What can go wrong, and what happens then:
- the server no longer has the statement (`DISCARD ALL`, a pooler's reset: 26000), or a
  migration changed the shape of its result ("cached plan must not change result type":
  0A000): the connection forgets what it had prepared and, when nothing of the query took
  effect (autocommit, no COMMIT of its own: its implicit transaction was rolled back), the
  query runs again as plain SQL; inside a transaction the error reaches the caller, whose
  transaction it spoiled;
- PREPARE refuses a statement (a parameter whose type it cannot tell): logged once, and the
  statement always runs as plain SQL in this process.

A pooler in transaction mode (PgBouncer's default) gives each transaction another server
connection, where the statements are not prepared: turn this off there
(`OPENHIVE_PG_PREPARED=false`)."""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

# Runs of a statement on one connection before it is prepared there: a connection that lives
# for one request does not pay a PREPARE for what it runs once.
USES_BEFORE_PREPARE = 3
# Prepared statements one connection may hold (each keeps a plan in its server process), and
# statement texts this process keeps track of.
MOST_PER_CONNECTION = 64
MOST_STATEMENTS = 1024
_STATE = "openhive_prepared"
_PLACEHOLDER = re.compile(r"%%|%s|%")
_EXECUTE = re.compile(r"EXECUTE (oh_[0-9a-f]{16})(?:\(%s(?:, %s)*\))?")
_COMMIT = re.compile(r"\bCOMMIT\b", re.IGNORECASE)
_LOST = "26000"  # invalid_sql_statement_name: the server has no statement of that name
_STALE = "0A000"  # feature_not_supported: cached plan must not change result type
_DUPLICATE = "42P05"  # duplicate_prepared_statement
# What PREPARE refuses a statement with for good: its text (42: a type it cannot tell, say)
# or a feature (0A).
_REFUSALS = ("42", "0A")


class _Statement:
    __slots__ = ("body", "execute", "name", "sql")

    def __init__(self, sql: str, body: str, count: int) -> None:
        self.sql = sql
        self.name = "oh_" + hashlib.blake2b(sql.encode(), digest_size=8).hexdigest()
        self.body = body
        args = f"({', '.join(['%s'] * count)})" if count else ""
        self.execute = f"EXECUTE {self.name}{args}"


class _ConnectionState:
    """What one server connection holds: the statements prepared on it, and how often each
    other one has run (a new connection, after a reconnect, starts again)."""

    __slots__ = ("raw", "ready", "uses")

    def __init__(self, raw: object) -> None:
        self.raw = raw
        self.ready: set[str] = set()
        self.uses: dict[str, int] = {}


_statements: dict[str, _Statement | None] = {}
_by_name: dict[str, str] = {}


def prepared(sql: str) -> str:
    """The text to send for `sql` (with `%s` placeholders, the same parameters in the same
    order): `EXECUTE` of its prepared statement where this connection has one (preparing it
    now, in a query of its own, once it is used often and the connection is idle), else `sql`
    itself."""
    conn = transaction.get_connection()
    if conn.vendor != "postgresql" or not settings.OPENHIVE["PG_PREPARED"]:
        return sql
    statement = _statements.get(sql, False)
    if statement is False:
        if len(_statements) >= MOST_STATEMENTS:
            return sql
        statement = _statement(sql)
    if statement is None:
        return sql
    state = _state(conn)
    if statement.name in state.ready:
        return statement.execute
    uses = state.uses[statement.name] = state.uses.get(statement.name, 0) + 1
    if uses < USES_BEFORE_PREPARE or len(state.ready) >= MOST_PER_CONNECTION:
        return sql
    if not _idle(conn) or not _prepare(conn, statement):
        return sql
    state.ready.add(statement.name)
    return statement.execute


def recover_lost_statements(execute: Any, sql: str, params: Any, many: bool, context: dict) -> Any:
    """An execute wrapper (on every PostgreSQL connection): a query that failed because a
    prepared statement was lost or stale runs again as plain SQL when it left nothing behind."""
    try:
        return execute(sql, params, many, context)
    except DatabaseError as exc:
        state = getattr(exc.__cause__, "sqlstate", None)
        if not statement_lost(exc) or "EXECUTE oh_" not in sql:
            raise
        conn = context["connection"]
        _forget(conn, stale=set(_EXECUTE.findall(sql)) if state == _STALE else set())
        if not _idle(conn) or _COMMIT.search(sql):
            raise  # inside a transaction, or part of the query may have committed
        logger.info("a prepared statement was %s; running the query unprepared",
                    "lost" if state == _LOST else "stale")  # fmt: skip
        return execute(unprepared(sql), params, many, context)


def statement_lost(exc: BaseException) -> bool:
    """Whether `exc` is a prepared statement lost or gone stale."""
    return getattr(exc.__cause__, "sqlstate", None) in (_LOST, _STALE)


def again_if_statements_lost(func: Callable[P, R]) -> Callable[P, R]:
    """For work that runs a transaction of its own with prepared statements inside it (a
    claim): when one was lost or stale, the transaction failed and was rolled back, and this
    connection forgot its statements (`recover_lost_statements`); the work is done once more,
    its statements prepared anew. Inside a caller's transaction the error goes on up."""

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except DatabaseError as exc:
            if not statement_lost(exc) or transaction.get_connection().in_atomic_block:
                raise
            logger.info("a prepared statement was lost inside %s; doing it again, prepared anew",
                        func.__qualname__)  # fmt: skip
            return func(*args, **kwargs)

    return run


def unprepared(sql: str) -> str:
    """`sql` with each EXECUTE of a statement prepared here put back as the statement itself."""
    return _EXECUTE.sub(lambda m: _by_name[m.group(1)], sql)


def install(connection: BaseDatabaseWrapper) -> None:
    """The recovering wrapper, outermost, on a connection that may run prepared statements."""
    if recover_lost_statements not in connection.execute_wrappers:
        connection.execute_wrappers.insert(0, recover_lost_statements)


def _statement(sql: str) -> _Statement | None:
    count = 0
    unsupported = False

    def number(match: re.Match) -> str:
        nonlocal count, unsupported
        if match.group() == "%%":
            return "%"
        if match.group() == "%":  # a named placeholder, say: not ours to translate
            unsupported = True
            return "%"
        count += 1
        return f"${count}"

    body = _PLACEHOLDER.sub(number, sql)
    statement = None if unsupported else _Statement(sql, body, count)
    _statements[sql] = statement
    if statement is not None:
        _by_name[statement.name] = sql
    return statement


def _state(conn: BaseDatabaseWrapper) -> _ConnectionState:
    state = getattr(conn, _STATE, None)
    if state is None or state.raw is not conn.connection:
        state = _ConnectionState(conn.connection)
        setattr(conn, _STATE, state)
        install(conn)
    return state


def _idle(conn: BaseDatabaseWrapper) -> bool:
    """Outside any transaction: a failed statement here spoils nobody's."""
    if conn.in_atomic_block or conn.connection is None:
        return False
    info = getattr(conn.connection, "info", None)
    return info is not None and int(info.transaction_status) == 0  # IDLE


def _prepare(conn: BaseDatabaseWrapper, statement: _Statement) -> bool:
    text = f"PREPARE {statement.name} AS {statement.body}"
    try:
        with conn.cursor() as cursor:
            try:
                cursor.execute(text)
            except DatabaseError as exc:
                if getattr(exc.__cause__, "sqlstate", None) != _DUPLICATE:
                    raise
                # Prepared before on this server connection (what we knew of it was lost):
                # made again, in case its plan went stale.
                cursor.execute(f"DEALLOCATE {statement.name}; {text}")
    except DatabaseError as exc:
        if not str(getattr(exc.__cause__, "sqlstate", None) or "").startswith(_REFUSALS):
            raise  # the connection broke, say: the caller's own query would fail the same way
        _statements[statement.sql] = None
        logger.warning(
            "PostgreSQL would not prepare a statement; it runs unprepared: %s",
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
        )
        return False
    return True


def _forget(conn: BaseDatabaseWrapper, *, stale: set[str]) -> None:
    """After a lost or stale statement: this connection prepares its statements anew. A stale
    one is dropped from the server now when the connection is idle; otherwise its next
    PREPARE finds it and replaces it."""
    state = _state(conn)
    state.ready.clear()
    if stale and _idle(conn):
        try:
            with conn.cursor() as cursor:
                cursor.execute("; ".join(f"DEALLOCATE {name}" for name in sorted(stale)))
        except DatabaseError:
            logger.info("could not drop a stale prepared statement; it is replaced when next made")

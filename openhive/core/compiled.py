"""Queries that every session start runs, compiled once per process instead of at each run.

The ORM compiles a queryset to SQL on every evaluation; for the few reads each session makes
on its way in and out (the prompt's memory, the inbox, the secrets to scrub), compiling cost
more than running them. `CompiledQuery` builds the queryset once with marker values, keeps the
SQL and where each marker landed among the parameters, then runs it with the real values."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.db.models import Model, QuerySet

# Marker values no real argument takes: each must land exactly once among the parameters (as
# the number, or as its text in a text field's lookup).
_MARKER_BASE = -7_345_120_000
# The attribute of a database connection that holds its row plans (`instances`).
_PLANS = "openhive_row_plans"
# libpq's PGRES_TUPLES_OK: a result that has rows to read, even with no columns ("SELECT ;").
_TUPLES_OK = 2


class CompiledQuery:
    def __init__(self, build: Callable[..., QuerySet]) -> None:
        self.build = build
        self._compiled: dict[str, tuple[str, tuple, dict[str, int]] | None] = {}
        self._lock = threading.Lock()

    def sql(self, **values: Any) -> tuple[str, list]:
        """The SQL and parameters of `build(**values)`."""
        compiled = self._compiled.get(connection.vendor, False)
        if compiled is False:
            compiled = self._compile(sorted(values))
        if compiled is None:  # the markers did not come through one to one: compile each time
            return self.build(**values).query.sql_with_params()
        sql, params, slots = compiled
        filled = list(params)
        for name, index in slots.items():
            filled[index] = values[name]
        return sql, filled

    def rows(self, model: type[Model], **values: Any) -> list:
        """Model instances (annotations included as attributes), as `raw_rows` makes them."""
        return raw_rows(model, *self.sql(**values))

    def _compile(self, names: list[str]) -> tuple[str, tuple, dict[str, int]] | None:
        markers = {name: _MARKER_BASE - i for i, name in enumerate(names)}
        slots: dict[str, int] | None = {}
        try:
            sql, params = self.build(**markers).query.sql_with_params()
        except Exception:  # a field that rejects the marker (a bool): no slots to find
            sql, params, slots = "", (), None
        for name, marker in markers.items() if slots is not None else ():
            # A text field takes the marker as its digits.
            where = [i for i, p in enumerate(params) if p == marker or p == str(marker)]
            if len(where) != 1:
                slots = None
                break
            slots[name] = where[0]  # type: ignore[index]
        compiled = None if slots is None else (sql, tuple(params), slots)
        with self._lock:
            self._compiled[connection.vendor] = compiled
        return compiled


def raw_rows(model: type[Model], sql: str, params: list | tuple) -> list:
    """`list(model.objects.raw(sql, params))` for a query run on every session start or claim:
    RawQuerySet's set-up (the model's fields by column, the init order, a compiler) cost more
    than the query itself, and an empty answer skips it altogether here."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        to_rows(cursor)
        return rows_here(model, cursor)


def rows_here(model: type[Model], cursor: Any) -> list:
    """The current result's rows as instances of `model`, as `raw_rows` makes them (for a
    query of several statements whose results are read one after another)."""
    found = cursor.fetchall()
    columns = column_names(cursor) if found else []
    return instances(model, columns, found)


def to_rows(cursor: Any) -> None:
    """A query of several statements (PostgreSQL) answers with its first result: move on past
    those without rows to read (a BEGIN or a SET sent first)."""
    while not _has_columns(cursor) and getattr(cursor, "nextset", None) and cursor.nextset():
        pass


def column_names(cursor: Any) -> list[str]:
    """The current result's column names. On psycopg read from the result itself: its
    `description` builds a Column (with its type looked up) per column at every access, ~40 us
    for a task row, more than making the row's instance."""
    result = getattr(cursor.cursor, "pgresult", False)
    if result is False:
        return [d[0] for d in cursor.description]
    encoding = cursor.cursor.connection.info.encoding
    return [result.fname(i).decode(encoding) for i in range(result.nfields)]


def _has_columns(cursor: Any) -> bool:
    result = getattr(cursor.cursor, "pgresult", False)
    if result is False:
        return cursor.description is not None
    return result is not None and (result.nfields > 0 or result.status == _TUPLES_OK)


def instances(model: type[Model], columns: list[str], rows: list[tuple]) -> list:
    """What RawQuerySet's iterator builds from these rows: the model's columns, converted from
    the database's values by their fields, go to `from_db` in the model's field order; any other
    column is set as an attribute as it came. No rows, no set-up."""
    if not rows:
        return []
    # The set-up (fields by column, the converters) is made once per model, columns and
    # connection: it cost ~20 times `from_db` itself (a claim's task row: 100 us against 5).
    conn = transaction.get_connection()
    # Kept on the connection (each thread has its own), and gone with it: a plan refers to its
    # connection, so a table beside it (even a weak one) would keep every connection alive.
    plans = conn.__dict__.get(_PLANS)
    if plans is None:
        plans = conn.__dict__[_PLANS] = {}
    key = (model, tuple(columns))
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _Plan(model, columns, conn)
    converted = plan.compiler.apply_converters(rows, plan.converters) if plan.converters else rows
    made = []
    for row in converted:
        instance = model.from_db(conn.alias, plan.names, [row[i] for i in plan.positions])
        for column, i in plan.extra:
            setattr(instance, column, row[i])
        made.append(instance)
    return made


class _Plan:
    def __init__(self, model: type[Model], columns: list[str], conn: Any) -> None:
        at = {column: i for i, column in enumerate(columns)}
        fields = [f for f in model._meta.concrete_fields if f.column in at]
        if model._meta.pk not in fields:
            raise ValueError(f"a raw query of {model.__name__} must select its primary key")
        self.names = [f.attname for f in fields]
        self.positions = [at[f.column] for f in fields]
        by_position = {at[f.column]: f for f in fields}
        self.extra = [(column, i) for column, i in at.items() if i not in by_position]
        # The real connection, not the proxy that looks it up on every attribute read.
        self.compiler = conn.ops.compiler("SQLCompiler")(None, conn, conn.alias)
        cols = [
            by_position[i].get_col(model._meta.db_table) if i in by_position else None
            for i in range(len(columns))
        ]
        self.converters = self.compiler.get_converters(cols)

"""Rows written by one INSERT built here, each value prepared as the ORM would prepare it.

The ORM's per-row machinery (model instances, query compilation with a placeholder per value,
save signals) cost more than the writes themselves for the rows written most often: a
session's exchanges and audit rows, and a chat burst's messages and trust decisions. No save
signal is sent (bulk_create sends none either): the models written this way have no receivers.
`insert_statement` gives the SQL and its parameters, which the caller runs alone or joined with
other statements in one query; `insert_instances` runs it for new model instances."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from openhive.core import jsontext
from openhive.core.prepared import prepared
from openhive.core.reads import Read, answers_from, run_reads

# Fields whose value, when it is already of one of these types, goes to the driver as it is:
# preparing it through the field changes nothing (text, numbers, flags, foreign keys).
_PLAIN_FIELDS = (models.CharField, models.TextField, models.IntegerField, models.BooleanField,
                 models.ForeignKey)  # fmt: skip
_PLAIN_VALUES = frozenset({str, int, bool, type(None)})
M = TypeVar("M", bound=models.Model)


@functools.cache
def _columns(model: type[models.Model]) -> tuple[str, tuple[tuple[models.Field, str], ...]]:
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    quote = connection.ops.quote_name
    names = ", ".join(quote(f.column) for f in fields)
    return f"INSERT INTO {quote(model._meta.db_table)} ({names}) VALUES ", _kinds(fields)


def insert_statement(
    model: type[models.Model], rows: list[dict], *, returning: str = ""
) -> tuple[str, list]:
    """The INSERT of `rows` (each a dict of field attnames; a field left out gets its default,
    or now for an auto_now(_add) timestamp) and its parameters; `returning`: a column the
    INSERT answers with. On PostgreSQL its text is the same for any rows: a prepared
    statement (`openhive.core.prepared`)."""
    tail = f" RETURNING {connection.ops.quote_name(returning)}" if returning else ""
    if connection.vendor == "postgresql":
        sql, kinds = _recordset(model)
        if sql:
            return _insert_recordset(prepared(sql + tail), kinds, rows)
    head, fields = _columns(model)
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    # The connection itself, not the proxy that looks it up on every attribute read.
    conn = transaction.get_connection()
    ops = conn.ops
    params: list = []
    # Rows written together often share one moment (a batch's created_at): adapted once.
    moment: object = None
    adapted: object = None
    for row in rows:
        for field, kind in fields:
            value = row[field.attname] if field.attname in row else _default(field)
            if type(value) in _PLAIN_VALUES and (kind == "plain" or value is None):
                params.append(value)  # None is NULL for every kind, a JSON column's too
            elif kind == "json" and type(value) in _JSON_VALUES:
                # What the field's own preparation ends in for plain data.
                params.append(ops.adapt_json_value(value, None))
            elif kind == "moment" and type(value) is datetime and value.tzinfo is not None:
                if value is not moment:
                    moment, adapted = value, ops.adapt_datetimefield_value(value)
                params.append(adapted)
            else:
                params.append(field.get_db_prep_save(value, conn))
    return head + ", ".join([row_sql] * len(rows)) + tail, params


# Values a JSON column without an encoder of its own stores as json.dumps gives them.
_JSON_VALUES = frozenset({dict, list, str, int, float, bool})


def _kinds(fields: tuple[models.Field, ...]) -> tuple[tuple[models.Field, str], ...]:
    """How each column's value is prepared: as it is (plain), by json.dumps (json), as an
    aware moment (moment, with time zones on), or by the field (prepared)."""
    return tuple((f, _kind(f)) for f in fields)


@functools.cache
def _recordset(model: type[models.Model]) -> tuple[str, tuple[tuple[models.Field, str], ...]]:
    """PostgreSQL: an INSERT of rows sent as one JSON document (`jsonb_to_recordset`). Its text
    is the same for any number of rows, so psycopg parses it once per process (a VALUES list
    is a new text per row count, and past 4 KB never cached), and the rows' values are one
    `json.dumps`, not a quoted literal per value. Columns are read as their base types (text,
    not varchar(n), whose cast would cut a long value): the column's own assignment refuses
    one, as for a VALUES list. '' when a JSON column has an encoder of its own."""
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    if any(getattr(f, "encoder", None) for f in fields if isinstance(f, models.JSONField)):
        return "", ()
    quote = connection.ops.quote_name
    names = ", ".join(quote(f.column) for f in fields)
    columns = ", ".join(f"{quote(f.column)} {_base_type(f)}" for f in fields)
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({names}) SELECT {names} "
        f"FROM jsonb_to_recordset(%s::jsonb) AS r({columns})"
    )
    # A JSON column's value is nested as it is (the ORM sends json.dumps of it, too).
    return sql, _kinds(fields)


def _kind(field: models.Field) -> str:
    if isinstance(field, models.JSONField):
        return "prepared" if field.encoder else "json"
    if isinstance(field, models.DateTimeField) and settings.USE_TZ:
        return "moment"
    return "plain" if isinstance(field, _PLAIN_FIELDS) else "prepared"


def _base_type(field: models.Field) -> str:
    db_type = field.db_type(connection) or "text"
    base = db_type.split("(", 1)[0].strip()
    return "text" if base in ("varchar", "char") else base


def _insert_recordset(sql: str, fields: tuple, rows: list[dict]) -> tuple[str, list]:
    plan = _document_plan(fields)
    try:
        document = [plan.row(row) for row in rows]
        return sql, [jsontext.dumps_strict(document)]
    except (_NotPlain, TypeError):
        return sql, [json.dumps([_document_row(fields, row) for row in rows])]


class _NotPlain(Exception):
    """A row the quick way cannot take as it is (a field left out, a value to prepare)."""


class _DocumentPlan:
    """A row of the recordset document, the quick way: the row's own values under the column
    names, but for the few fields whose value the ORM would prepare first (an aware moment, a
    decimal), prepared as `_document_row` does. A row that leaves out a field, or whose
    value the JSON encoder refuses, takes `_document_row` (field by field) instead. The field by
    field way cost ~30 bytecodes a value: 11,000 for the final write of a ten-step session."""

    def __init__(self, fields: tuple) -> None:
        self.names = frozenset(field.attname for field, _kind in fields)
        self.renamed = [(f.attname, f.column) for f, _k in fields if f.attname != f.column]
        self.prepared = [
            (f.attname, f.column, _quick_value(f, k)) for f, k in fields if k in _PREPARED
        ]

    def row(self, row: dict) -> dict:
        if not self.names <= row.keys():
            raise _NotPlain
        if len(row) == len(self.names):
            values = dict(row)
        else:
            values = {name: row[name] for name in self.names}
        for attname, column in self.renamed:
            values[column] = values.pop(attname)
        for attname, column, prepare in self.prepared:
            values[column] = prepare(row[attname])
        return values


_PREPARED = frozenset({"moment", "prepared"})


def _quick_value(field: models.Field, kind: str) -> Callable[[object], object]:
    """`_document_value` for one field, with a shortcut for its common value: an aware
    moment's ISO text; a finite decimal's text (what DecimalField prepares a Decimal into
    on PostgreSQL: the Decimal itself, which the column reads back exactly)."""
    if kind == "moment":
        return lambda value: (
            value.isoformat()
            if type(value) is datetime and value.tzinfo is not None
            else _document_value(field, kind, value)
        )
    if isinstance(field, models.DecimalField):
        return lambda value: (
            str(value)
            if type(value) is Decimal and value.is_finite()
            else _document_value(field, kind, value)
        )
    return lambda value: _document_value(field, kind, value)


@functools.cache
def _document_plan(fields: tuple) -> _DocumentPlan:
    return _DocumentPlan(fields)


def _document_row(fields: tuple, row: dict) -> dict:
    values = {}
    for field, kind in fields:
        value = row[field.attname] if field.attname in row else _default(field)
        values[field.column] = _document_value(field, kind, value)
    return values


def _document_value(field: models.Field, kind: str, value: object) -> object:
    if kind == "moment" and type(value) is datetime and value.tzinfo is not None:
        return value.isoformat()  # what the ORM sends, as text
    if kind != "json" and not (kind == "plain" and type(value) in _PLAIN_VALUES):
        # The value the ORM would send (an aware datetime, a Decimal), as text that the
        # column's type reads back exactly.
        value = field.get_db_prep_save(value, connection)
        if value is not None and type(value) not in _PLAIN_VALUES:
            value = value.isoformat() if isinstance(value, datetime) else str(value)
    return value


def _default(field: models.Field) -> object:
    if getattr(field, "auto_now_add", False) or getattr(field, "auto_now", False):
        return timezone.now()
    return field.get_default()


def has_save_receivers(model: type[models.Model]) -> bool:
    """Whether something listens for the model's save signals, which only `save()` sends: such
    a model is saved, not written by the statements here."""
    return pre_save.has_listeners(model) or post_save.has_listeners(model)


def insert_instances(
    instances: list[models.Model],
    *,
    after: tuple[str, list] | None = None,
    then: Sequence[Read] = (),
) -> list[Any]:
    """INSERT new instances of one model (with an auto-incremented key) in one statement and
    set their keys, as bulk_create does and without its per-value query compilation. Each
    field's value is the one save() would store (auto_now_add stamps it). No save signal is
    sent, as by bulk_create.

    `after`: one statement (SQL, parameters) sent first in the same query, where
    `openhive.core.db.statements_in_one_query()` holds; outside a transaction, PostgreSQL runs
    both as one. `then`: reads sent after the INSERT in the same query (where that holds too);
    their answers are returned."""
    if not instances:
        return run_reads(list(then))
    meta = instances[0]._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    rows = [{f.attname: f.pre_save(instance, True) for f in fields} for instance in instances]
    keys, answers = _insert_rows(type(instances[0]), rows, after=after, then=then)
    alias = transaction.get_connection().alias
    for instance, key in zip(instances, keys, strict=True):
        instance.pk = key
        instance._state.adding = False
        instance._state.db = alias
    return answers


def insert_new(
    model: type[M], rows: list[dict], *, after: tuple[str, list] | None = None
) -> list[M]:
    """`insert_instances` for rows given as dicts of field attnames: the stored instances come
    back, built as the ORM builds loaded rows (`Model.from_db`, every value by position). A
    field a row leaves out gets its default, and an auto_now(_add) timestamp one moment for
    all the rows. For a chat burst's 200 messages, constructing instances field by field and
    reading their values back took over a third of the batch."""
    if not rows:
        return []
    fields = model._meta.concrete_fields
    missing = {
        f.attname: _default(f) for f in fields if not f.primary_key and f.attname not in rows[0]
    }
    complete = [{**missing, **row} for row in rows] if missing else rows
    keys, _ = _insert_rows(model, complete, after=after, then=())
    alias = transaction.get_connection().alias
    names = [f.attname for f in fields]
    return [
        model.from_db(alias, names, [key if f.primary_key else row[f.attname] for f in fields])
        for row, key in zip(complete, keys, strict=True)
    ]


def _insert_rows(
    model: type[models.Model],
    rows: list[dict],
    *,
    after: tuple[str, list] | None,
    then: Sequence[Read],
) -> tuple[list[Any], list[Any]]:
    """The rows' new keys, in the rows' order, and the answers of `then`."""
    sql, params = insert_statement(model, rows, returning=model._meta.pk.column)
    conn = transaction.get_connection()
    if after is not None:
        sql, params = f"{after[0]}; {sql}", [*after[1], *params]
    for read in then:
        sql, params = f"{sql}; {prepared(read.sql)}", [*params, *read.params]
    answers: list[Any] = []
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        if after is not None:
            cursor.nextset()  # past `after`'s result, to the RETURNING
        # Keys are handed out as the rows go in, in the rows' order: sorted, they pair up
        # whatever order RETURNING lists them in.
        keys = sorted(row[0] for row in cursor.fetchall())
        if then:
            cursor.nextset()
            answers = answers_from(cursor, list(then))
    return keys, answers

"""Engine writes: the leadership lease of the engine loop, the workers' heartbeats, and the
session records."""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Q
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from openhive.core.db import NO_FLUSH_WAIT, insert_after, reconnecting, statements_in_one_query

from .models import LEADER, EngineLease, LlmExchange, Session, ToolCall, WorkerBeat


def engine_lead(*, holder: str, now: datetime, ttl_seconds: float) -> bool:
    """Take or keep the leadership; True if `holder` leads until now + ttl."""
    expires = now + timedelta(seconds=ttl_seconds)
    kept = (
        EngineLease.objects.filter(name=LEADER)
        .filter(Q(holder=holder) | Q(expires_at__lt=now))
        .update(holder=holder, expires_at=expires)
    )
    if kept:
        return True
    try:
        with transaction.atomic():
            EngineLease.objects.create(
                name=LEADER, holder=holder, expires_at=expires, acquired_at=now
            )
    except IntegrityError:
        return False
    return True


def engine_resign(*, holder: str) -> None:
    EngineLease.objects.filter(name=LEADER, holder=holder).delete()


# --- sessions: the recorder's writes ------------------------------------------------------------


@reconnecting
def session_open(
    *,
    team_id: int,
    kind: str,
    task_id: int | None = None,
    topic_id: int | None = None,
    parent_session_id: int | None = None,
    parent_task_id: int | None = None,
    trace_id: str = "",
    spec_options: dict | None = None,
) -> Session:
    # A parent that no longer exists (deleted meanwhile) is not a reason to lose the session.
    if parent_session_id and not Session.objects.filter(pk=parent_session_id).exists():
        parent_session_id = None
    tasks = Session._meta.get_field("parent_task").related_model
    if parent_task_id and not tasks.objects.filter(pk=parent_task_id).exists():
        parent_task_id = None
    session = Session(
        team_id=team_id,
        task_id=task_id,
        topic_id=topic_id,
        kind=kind,
        parent_session_id=parent_session_id,
        parent_task_id=parent_task_id,
        trace_id=trace_id,
        spec_options=spec_options or {},
        # A subagent's session says which one it ran as: the spec options name it (what a
        # replay needs to build the same agent again), the column lets the admin show it.
        agent_name=str((spec_options or {}).get("subagent") or "")[:100],
    )
    # One round trip: the setting and the INSERT in one query (was BEGIN, the setting, the
    # INSERT and COMMIT).
    one_query = _may_skip_flush_wait() and statements_in_one_query()
    if not (one_query and insert_after(NO_FLUSH_WAIT, session)):
        insert_returning(session)
    return session


def insert_returning(instance: models.Model) -> None:
    """`save(force_insert=True)` by the statement a step's rows are written with, the new key
    read back (RETURNING): save()'s own machinery cost more than the INSERT on SQLite. A model
    with save signal receivers (which only save() calls) is saved."""
    model = type(instance)
    if pre_save.has_listeners(model) or post_save.has_listeners(model):
        instance.save(force_insert=True)
        return
    meta = instance._meta
    # pre_save gives each field's value as save() would store it (auto_now_add sets it).
    row = {f.attname: f.pre_save(instance, True) for f in meta.concrete_fields if not f.primary_key}
    sql, params = _insert(model, [row])
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} RETURNING {connection.ops.quote_name(meta.pk.column)}", params)
        instance.pk = cursor.fetchone()[0]
    instance._state.adding = False
    instance._state.db = connection.alias


# What a step leaves on the session row: its running totals, and at the end how it stopped.
STEP_FIELDS = (
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "model",
    "provider_profile",
)


@reconnecting
def session_record_step(
    *, session: Session, exchanges: list[dict], tool_calls: list[dict], fields: dict
) -> None:
    """A session's step in one transaction (one commit, where an exchange, the session's
    totals and each audit row used to commit apart): its model exchanges, the audit rows of its
    tool calls (already scrubbed), and `fields` set on the session row (its totals, and the
    stop when it ends). Setting values, not adding to them, keeps a retry after a reconnect
    from counting twice."""
    now = timezone.now()
    statements = []
    if exchanges:
        rows = [{"created_at": now, **e, "session_id": session.pk} for e in exchanges]
        statements.append(_insert(LlmExchange, rows))
    if tool_calls:
        rows = [{"created_at": now, **r, "tool": r["tool"][:100]} for r in tool_calls]
        statements.append(_insert(ToolCall, rows))
    for name, value in fields.items():
        setattr(session, name, value)
    if fields:
        statements.append(_update(session, list(fields)))
    if not statements:
        return
    if _may_skip_flush_wait():
        statements.insert(0, (NO_FLUSH_WAIT, []))
    if statements_in_one_query():
        # One round trip: PostgreSQL runs the statements of one query as one transaction
        # (or as part of the caller's), where BEGIN, each statement and COMMIT took one each.
        with connection.cursor() as cursor:
            cursor.execute(
                "; ".join(sql for sql, _ in statements), [p for _, ps in statements for p in ps]
            )
        return
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)


def _may_skip_flush_wait() -> bool:
    """Whether a session write may commit without waiting for PostgreSQL's WAL flush (one
    fsync, several ms on many disks: more than a quick model step). The WAL is one sequence:
    the next commit that waits -- the task's end, the chat reply stored, any state change of
    the queue -- makes every session write before it durable too. Only a crash of the
    database server itself in between can lose the newest session rows, and then the work
    they record has no recorded end either (its task runs again). OPENHIVE_SESSION_SYNC_COMMIT
    makes every session write wait. Inside a caller's transaction the commit is the caller's."""
    return (
        connection.vendor == "postgresql"
        and not settings.OPENHIVE["SESSION_SYNC_COMMIT"]
        and not connection.in_atomic_block
    )


# A step's rows are written by statements built here, with each value prepared by its field as
# the ORM prepares it: the ORM's per-row machinery (model instances, query compilation, save
# signals, none of which these tables use) cost more than the writes.


# Fields whose value, when it is already of one of these types, goes to the driver as it is:
# preparing it through the field changes nothing (text, numbers, flags, foreign keys).
_PLAIN_FIELDS = (models.CharField, models.TextField, models.IntegerField, models.BooleanField,
                 models.ForeignKey)  # fmt: skip
_PLAIN_VALUES = frozenset({str, int, bool, type(None)})


@functools.cache
def _columns(model: type[models.Model]) -> tuple[str, tuple[tuple[models.Field, str], ...]]:
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    quote = connection.ops.quote_name
    names = ", ".join(quote(f.column) for f in fields)
    return f"INSERT INTO {quote(model._meta.db_table)} ({names}) VALUES ", _kinds(fields)


def _insert(model: type[models.Model], rows: list[dict]) -> tuple[str, list]:
    if connection.vendor == "postgresql":
        sql, kinds = _recordset(model)
        if sql:
            return _insert_recordset(sql, kinds, rows)
    head, fields = _columns(model)
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    # The connection itself, not the proxy that looks it up on every attribute read.
    conn = transaction.get_connection()
    ops = conn.ops
    params: list = []
    for row in rows:
        for field, kind in fields:
            value = row[field.attname] if field.attname in row else field.get_default()
            if type(value) in _PLAIN_VALUES and (kind == "plain" or value is None):
                params.append(value)  # None is NULL for every kind, a JSON column's too
            elif kind == "json" and type(value) in _JSON_VALUES:
                # What the field's own preparation ends in for plain data.
                params.append(ops.adapt_json_value(value, None))
            elif kind == "moment" and type(value) is datetime and value.tzinfo is not None:
                params.append(ops.adapt_datetimefield_value(value))
            else:
                params.append(field.get_db_prep_save(value, conn))
    return head + ", ".join([row_sql] * len(rows)), params


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
    document = []
    for row in rows:
        values = {}
        for field, kind in fields:
            value = row[field.attname] if field.attname in row else field.get_default()
            if kind == "moment" and type(value) is datetime and value.tzinfo is not None:
                value = value.isoformat()  # what the ORM sends, as text
            elif kind != "json" and not (kind == "plain" and type(value) in _PLAIN_VALUES):
                # The value the ORM would send (an aware datetime, a Decimal), as text that
                # the column's type reads back exactly.
                value = field.get_db_prep_save(value, connection)
                if value is not None and type(value) not in _PLAIN_VALUES:
                    value = value.isoformat() if isinstance(value, datetime) else str(value)
            values[field.column] = value
        document.append(values)
    return sql, [json.dumps(document)]


def _update(instance: models.Model, names: list[str]) -> tuple[str, list]:
    meta = instance._meta
    fields = [meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(meta.db_table)} SET "
        + ", ".join(f"{quote(f.column)} = %s" for f in fields)
        + f" WHERE {quote(meta.pk.column)} = %s"
    )
    params = [f.get_db_prep_save(getattr(instance, f.attname), connection) for f in fields]
    return sql, [*params, instance.pk]


def sessions_close_abandoned(*, task_ids: list[int], stop_reason: str, error: str) -> int:
    """Close the still-open sessions of tasks whose worker is gone: no row stays `running`
    after the process that ran it has died."""
    if not task_ids:
        return 0
    return Session.objects.filter(task_id__in=task_ids, finished_at__isnull=True).update(
        stop_reason=stop_reason, error=error, finished_at=timezone.now()
    )


@reconnecting
def toolcall_record(
    *,
    session_id: int | None,
    team_id: int | None,
    team_name: str,
    tool: str,
    arguments: dict,
    success: bool,
    result: dict,
    error: str,
    duration_ms: int,
) -> ToolCall:
    """The audit row of one tool call (already scrubbed by the caller). A savepoint: a failed
    insert must not break the caller's transaction (PostgreSQL)."""
    with transaction.atomic():
        return ToolCall.objects.create(
            session_id=session_id,
            team_id=team_id,
            team_name=team_name,
            tool=tool[:100],
            arguments=arguments,
            success=success,
            result=result,
            error=error,
            duration_ms=duration_ms,
        )


# --- workers' heartbeats -------------------------------------------------------------------


def worker_beat(*, name: str, threads: int, busy: int, now: datetime) -> None:
    """A pull worker is alive (one UPDATE, an INSERT the first time)."""
    # The name (host:pid) is this process's own: no other writer races for the row.
    if not WorkerBeat.objects.filter(name=name).update(threads=threads, busy=busy, seen_at=now):
        WorkerBeat.objects.create(
            name=name, threads=threads, busy=busy, seen_at=now, started_at=now
        )


def worker_gone(*, name: str) -> None:
    WorkerBeat.objects.filter(name=name).delete()

"""Engine writes: the leadership lease of the engine loop, the workers' heartbeats, and the
session records."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from openhive.core.db import (
    NO_FLUSH_WAIT,
    may_skip_flush_wait,
    reconnecting,
    statements_in_one_query,
)
from openhive.core.prepared import prepared
from openhive.core.reads import Read, run_reads
from openhive.core.rows import has_save_receivers, insert_instances, insert_statement

from .models import LEADER, EngineLease, LlmExchange, Session, ToolCall, WorkerBeat

if TYPE_CHECKING:
    from .spec import ClosingWrite


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
    then: Sequence[Read] = (),
) -> tuple[Session, list[Any]]:
    """The session's row, and the answers of `then`: reads the session's start needs (its
    prompt's, the scrubber's), sent with the INSERT in one query where the database takes
    several statements in one."""
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
    if not statements_in_one_query() or has_save_receivers(Session):
        insert_returning(session)
        return session, run_reads(list(then))
    # One round trip: the setting, the INSERT and the reads in one query (were BEGIN, the
    # setting, the INSERT, COMMIT, and a round trip per read).
    after = (NO_FLUSH_WAIT, []) if may_skip_flush_wait() else None
    return session, insert_instances([session], after=after, then=then)


def insert_returning(instance: models.Model) -> None:
    """`save(force_insert=True)` by the statement a step's rows are written with, the new key
    read back (RETURNING): save()'s own machinery cost more than the INSERT on SQLite. A model
    with save signal receivers (which only save() calls) is saved."""
    if has_save_receivers(type(instance)):
        instance.save(force_insert=True)
        return
    insert_instances([instance])


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
    *,
    session: Session,
    exchanges: list[dict],
    tool_calls: list[dict],
    fields: dict,
    then: ClosingWrite | None = None,
) -> int | None:
    """A session's step in one transaction (one commit, where an exchange, the session's
    totals and each audit row used to commit apart): its model exchanges, the audit rows of its
    tool calls (already scrubbed), `fields` set on the session row (its totals, and the stop
    when it ends), and last `then`, the caller's statement (a task's end), whose changed rows
    are returned (None without it). Setting values, not adding to them, keeps a retry after a
    reconnect from counting twice."""
    now = timezone.now()
    statements = []
    if exchanges:
        rows = [{"created_at": now, **e, "session_id": session.pk} for e in exchanges]
        statements.append(insert_statement(LlmExchange, rows))
    if tool_calls:
        rows = [{"created_at": now, **r, "tool": r["tool"][:100]} for r in tool_calls]
        statements.append(insert_statement(ToolCall, rows))
    for name, value in fields.items():
        setattr(session, name, value)
    if fields:
        statements.append(_update(session, list(fields)))
    if then is not None:
        statements.append((then.sql, list(then.params)))
    if not statements:
        return None
    if may_skip_flush_wait() and (then is None or not then.durable):
        statements.insert(0, (NO_FLUSH_WAIT, []))
    if statements_in_one_query():
        # One round trip: PostgreSQL runs the statements of one query as one transaction
        # (or as part of the caller's), where BEGIN, each statement and COMMIT took one each.
        with connection.cursor() as cursor:
            cursor.execute(
                "; ".join(sql for sql, _ in statements), [p for _, ps in statements for p in ps]
            )
            if then is None:
                return None
            while cursor.nextset():  # to the last statement's result: `then`'s
                pass
            return cursor.rowcount
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)
        return cursor.rowcount if then is not None else None


def _update(instance: models.Model, names: list[str]) -> tuple[str, list]:
    meta = instance._meta
    fields = [meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(meta.db_table)} SET "
        + ", ".join(f"{quote(f.column)} = %s" for f in fields)
        + f" WHERE {quote(meta.pk.column)} = %s"
    )
    sql = prepared(sql)
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

"""Group commit of task ends: the ends of many held tasks written in one transaction (one WAL
flush for all of them instead of one each), for a pull worker's finisher (`tasks.finisher`).

Each end is what `task_finish(held=…)` records for one task -- the same conditional UPDATE (only
while the writer still holds the task), the same chat notification, budget escalation and
`task_finished` signal, all inside the one transaction -- so nothing about a task's end is
visible, and nobody is told of it, before it is committed. On PostgreSQL the UPDATE itself is
one statement for the whole batch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction

from openhive.core.db import NO_FLUSH_WAIT, reconnecting

from ..models import Task
from .claims import end_held
from .ends import after_end
from .queue import _finish_held, held_end_fields


@dataclass
class HeldEnd:
    """The end of one task a worker holds, as the runner saw it (`now` is when it ended,
    not when the batch is written)."""

    task: Task
    worker: str
    status: str
    result: str
    stop_reason: str
    now: datetime


@reconnecting
def tasks_finish_held(ends: list[HeldEnd]) -> list[Task | None]:
    """Record every end in one transaction; for each, the task (its end recorded) or None
    when its worker no longer held it (cancelled or reaped meanwhile: that status stands).
    A retry after a lost connection is safe: an end already written is no longer held, so
    it is not written twice (and reads as None, as `task_finish` would)."""
    if not ends:
        return []
    rows = [_fields(end) for end in ends]
    with transaction.atomic(durable=True):
        if connection.vendor == "postgresql":
            moved = _update_postgres(ends, rows)
        else:
            moved = {end.task.pk for end, row in zip(ends, rows, strict=True)
                     if end_held(end.task.pk, end.worker, row)}  # fmt: skip
        finished: list[Task | None] = []
        for end, row in zip(ends, rows, strict=True):
            if end.task.pk not in moved:
                finished.append(None)
                continue
            task = end.task
            for name, value in row.items():
                setattr(task, name, value)
            after_end(task, status=end.status, stop_reason=end.stop_reason)
            finished.append(task)
    return finished


def task_finish_held_alone(end: HeldEnd) -> Task | None:
    """One end in its own transaction: what a batch falls back to when writing it together
    failed, so one task's bad end cannot fail the others."""
    return _finish_held(end.task, worker=end.worker, status=end.status, result=end.result,
                        now=end.now, stop_reason=end.stop_reason)  # fmt: skip


def _fields(end: HeldEnd) -> dict:
    return held_end_fields(end.task, status=end.status, result=end.result, now=end.now,
                           stop_reason=end.stop_reason)  # fmt: skip


def _update_postgres(ends: list[HeldEnd], rows: list[dict]) -> set[int]:
    """One UPDATE for the batch, its ends sent as one JSON document (one `json.dumps`, where
    arrays were dumped by psycopg element by element); the ids it moved come back. The ids
    also go as an array, so the rows are found by key: joined with the document alone (which
    the planner takes for 100 rows), the UPDATE read every `running` entry of the team-status
    index, a scan that grows with the table."""
    table = connection.ops.quote_name(Task._meta.db_table)
    prefix, source = "", ""
    if not settings.OPENHIVE["QUEUE_SYNC_FINISH"]:
        # See `end_held`: the operator's explicit trade, scoped to this transaction.
        prefix = f"WITH async AS ({NO_FLUSH_WAIT}) "
        source = "async, "
    document = [
        {
            "id": end.task.pk,
            "worker": end.worker,
            "status": row["status"],
            "stop_reason": row["stop_reason"],
            "result": row["result"],
            "finished_at": row["finished_at"].isoformat(),
            "duration_ms": row["duration_ms"],
        }
        for end, row in zip(ends, rows, strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""{prefix}
            UPDATE {table} AS t
               SET status = v.status, stop_reason = v.stop_reason, result = v.result,
                   finished_at = v.finished_at, duration_ms = v.duration_ms,
                   lease_owner = '', lease_expires_at = NULL
              FROM {source}jsonb_to_recordset(%s::jsonb)
                   AS v(id bigint, worker text, status text, stop_reason text, result text,
                        finished_at timestamptz, duration_ms int)
             WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id
               AND t.status = %s AND t.lease_owner = v.worker
            RETURNING t.id
            """,
            [json.dumps(document), [end.task.pk for end in ends], Task.Status.RUNNING],
        )
        return {task_id for (task_id,) in cursor.fetchall()}

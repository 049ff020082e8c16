"""Batched claims: one worker process takes up to N admissible tasks of any teams in one short
transaction, instead of one team-locked transaction per task.

The guarantees are those of `task_claim_next`: only `pending` tasks that are ready are taken,
in priority then FIFO order; a team never runs more than its cap of `running` tasks; no task
of a team under an org-op is taken. They rest on the same per-team critical section:

- PostgreSQL: statement 1 locks the rows of the candidate teams (`FOR UPDATE SKIP LOCKED`, so
  a team another worker is claiming for is skipped, not waited for); statement 2 -- a new
  snapshot, taken once the locks are held, so it sees every claim committed for those teams --
  counts their running tasks, checks the org-op mutex, picks each team's best pending tasks up
  to its free slots and marks them running, in one `UPDATE … RETURNING`.
- SQLite: the transaction is IMMEDIATE, so it holds the database write lock from BEGIN; the
  counts are read on the latest state, each team's best pending tasks come from its pending
  index (cut at its room, as on PostgreSQL), then one UPDATE marks the batch.

The end of a claimed task (`end_held`) is one UPDATE too, conditional on the lease owner.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from openhive.core.compiled import raw_rows, to_rows
from openhive.core.db import (
    NO_FLUSH_WAIT,
    NO_FLUSH_WAIT_SET,
    may_skip_flush_wait,
    reconnecting,
    statements_in_one_query,
)
from openhive.core.prepared import again_if_statements_lost, prepared
from openhive.engine import stopping
from teams.models import Team

from ..models import OrgOpLock, Task, UserQuestion
from ..selectors import best_task_join, most_urgent_of_teams, running_and_held, team_cap
from ..timing import lease_until

# How many of the most urgent pending tasks name the teams a claim considers first; when they
# name too few teams with room, the claim asks every team for its best task instead.
CANDIDATE_WINDOW = 200


# The claim's settings, for its own transaction only (the three-trip claim every worker
# makes; a claim made inside a caller's transaction leaves that transaction's alone):
# - it reads the head of the queue in index order and stops at CANDIDATE_WINDOW rows, and its
#   plans must not depend on the table's statistics: after a burst of enqueues, until
#   autovacuum analyzes the table, the planner believes a handful of tasks are pending and
#   fetches them all by bitmap to sort them -- every pending task, at every claim (measured:
#   2-11 ms a claim with 20,000 queued, against 0.2 ms in index order);
# - its statements are prepared on the connection (`prepared`) and planned once, generically:
#   planning them took longer than running them (0.56 ms against 0.24 ms a claim). A generic
#   plan lasts until the table's statistics change, so one made on a nearly empty queue read
#   the whole table once thousands were queued (2.7 ms a claim at 20,000): no seq scan, then;
# - that setting prices a seq scan it cannot avoid (the teams, read whole when the head of
#   the queue is full) so high that the server compiled the query: 135 ms. No JIT.
IN_INDEX_ORDER = (
    "SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off; SET LOCAL jit = off;"
    " SET LOCAL plan_cache_mode = force_generic_plan"
)


def batch_owner() -> str:
    """A lease owner for one batch: `host:pid:nonce`. The pid lets a restarted host hand back
    the claims of a dead process; the nonce makes a task claimed again later (after a reap or
    a hand-back) belong to a different owner, so a late session sees it no longer holds it."""
    return f"{socket.gethostname()}:{os.getpid()}:b{uuid.uuid4().hex[:12]}"


def _tables() -> tuple[str, str, str]:
    quote = connection.ops.quote_name
    return (
        quote(Task._meta.db_table),
        quote(Team._meta.db_table),
        quote(OrgOpLock._meta.db_table),
    )


def _candidate_teams(now: datetime, limit: int, before: str = "") -> list[tuple[int, int, int]]:
    """(team id, cap, free slots) of the teams whose best ready task is most urgent, most
    urgent first; teams that are full or under an org-op are left out. Outside a lock these
    are hints (PostgreSQL looks again under the lock); inside SQLite's write lock they are
    the truth. `before`: statements sent in the same query, ahead of it.

    The head of the queue (CANDIDATE_WINDOW tasks, read in index order) names them when it
    holds `limit` teams with room, or the whole queue. Otherwise -- a full team's backlog
    fills the head -- each team's best task is looked up in the team's own index, so a team
    whose work was queued behind it is not starved until that backlog drains."""
    task_table, team_table, _ = _tables()
    at = connection.ops.adapt_datetimefield_value(now)
    head = prepared(f"""
            SELECT h.team_id, tm.name, {running_and_held("h.team_id")}, h.n
              FROM (SELECT team_id, min(rk) AS best, count(*) AS n
                      FROM (SELECT team_id,
                                   row_number() OVER (ORDER BY priority, created_at, id) AS rk
                              FROM {task_table}
                             WHERE status = 'pending' AND (run_after IS NULL OR run_after <= %s)
                             ORDER BY priority, created_at, id
                             LIMIT {CANDIDATE_WINDOW}) head
                     GROUP BY team_id) h
              JOIN {team_table} tm ON tm.id = h.team_id
             ORDER BY h.best""")
    with connection.cursor() as cursor:
        cursor.execute(f"{before} {head}" if before else head, [at, at])
        to_rows(cursor)
        rows = cursor.fetchall()
    teams = _with_room([row[:4] for row in rows])
    if len(teams) >= limit or sum(row[4] for row in rows) < CANDIDATE_WINDOW:
        return teams
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT tm.id, tm.name, {running_and_held("tm.id")}
              FROM {team_table} tm
              {best_task_join("tm.id")}
             ORDER BY h.priority, h.created_at, h.id""",
            [at, at],
        )
        return _with_room(cursor.fetchall())


def _with_room(rows: Iterable[tuple[int, str, int, bool]]) -> list[tuple[int, int, int]]:
    teams = []
    for team_id, name, running, held in rows:
        cap = team_cap(name)
        if not held and running < cap:
            teams.append((team_id, cap, cap - running))
    return teams


@reconnecting
def task_claim_batch(*, worker: str, limit: int) -> list[Task]:
    """Claim up to `limit` admissible tasks of any teams for `worker` (their lease owner), in
    priority then FIFO order, within each team's free slots and outside org-ops. Returns
    them with their `team` loaded, most urgent first; [] when nothing can run now."""
    if limit <= 0:
        return []
    if statements_in_one_query() and not connection.in_atomic_block:
        return held_since_now(_claim_postgres_in_three_trips(worker=worker, limit=limit))
    if connection.vendor == "postgresql":
        teams = _candidate_teams(timezone.now(), limit)
        if not teams:
            return []
        with transaction.atomic():
            claimed = _claim_postgres(teams, worker=worker, limit=limit)
        return held_since_now(claimed)
    with transaction.atomic():  # IMMEDIATE: the write lock is held from here
        now = timezone.now()
        claimed = _claim_sqlite(_candidate_teams(now, limit), worker=worker, limit=limit, now=now)
    return held_since_now(claimed)


@again_if_statements_lost
def _claim_postgres_in_three_trips(*, worker: str, limit: int) -> list[Task]:
    """The same statements in the same transaction, its BEGIN sent with the candidates'
    query and its COMMIT with the claiming UPDATE: three round trips where Django's
    transaction took five (BEGIN and COMMIT each one of their own). The candidates are read
    inside the transaction, as hints still (each statement sees what is committed when it
    starts, and none locks). With no candidate, the empty transaction costs a COMMIT more."""
    # Before the BEGIN: a statement is prepared only between transactions.
    statements = (prepared(_lock_statement()), prepared(_pick_statement()))
    with rolled_back_on_error():
        teams = _candidate_teams(timezone.now(), limit, before=f"{claim_begin()}{IN_INDEX_ORDER};")
        claimed = (
            _claim_postgres(teams, worker=worker, limit=limit, commit=True, statements=statements)
            if teams
            else []
        )
        if not teams:
            send("COMMIT")
        return claimed


def claim_begin() -> str:
    """The BEGIN a claim sends in its first query (PostgreSQL). A claim is where a task's
    session starts, seen from the queue, and it commits as that session's own rows do: without
    waiting for the WAL flush unless the operator asked otherwise (`may_skip_flush_wait`). A
    task's life then waits for two flushes, its enqueue and its end, where it waited for three."""
    return f"BEGIN; {NO_FLUSH_WAIT_SET}; " if may_skip_flush_wait() else "BEGIN; "


@contextlib.contextmanager
def rolled_back_on_error() -> Iterator[None]:
    """Around a transaction whose BEGIN and COMMIT travel inside our own queries: on any error
    a ROLLBACK (or, failing that, a closed connection). Never leave the connection inside the
    transaction: Django takes it for autocommit."""
    try:
        yield
    except BaseException:
        try:
            send("ROLLBACK")
        except BaseException:
            connection.close()
        raise


def send(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)


def held_since_now(claimed: Iterable[Task]) -> list[Task]:
    """Most urgent first, each stamped with when (monotonic) and at which stop generation of
    this process its claim proved it held: the first cancel check of its session may take
    that as its read (`runner.still_held_check`)."""
    proof = (time.monotonic(), stopping.generation())
    tasks = sorted(claimed, key=lambda t: (t.priority, t.created_at, t.pk))
    for task in tasks:
        task.held_since = proof
    return tasks


def _claim_sqlite(
    teams: list[tuple[int, int, int]], *, worker: str, limit: int, now: datetime
) -> list[Task]:
    # Each team's head, cut at its room, as the PostgreSQL claim's LATERAL does. One scan of
    # all those teams' pending tasks sorted them all at every claim: 3.5 ms a claim with 4,000
    # queued, 16.6 ms with 20,000.
    picked = most_urgent_of_teams([(t, free) for t, _cap, free in teams], now=now, limit=limit)
    if not picked:
        return []
    task_table, team_table, _ = _tables()
    at = connection.ops.adapt_datetimefield_value(now)
    # The claiming UPDATE reads the claimed rows back, as PostgreSQL's does.
    claimed = raw_rows(
        Task,
        f"""
            UPDATE {task_table}
               SET status = 'running', lease_owner = %s, lease_expires_at = %s,
                   started_at = %s, attempts = attempts + 1
             WHERE status = 'pending' AND id IN ({", ".join("%s" for _ in picked)})
            RETURNING *, {may_resume(task_table)}
            """,
        [worker, connection.ops.adapt_datetimefield_value(lease_until(now)), at, *picked],
    )
    if not claimed:
        return []
    ids = sorted({task.team_id for task in claimed})
    teams_by_id = {
        team.pk: team
        for team in raw_rows(
            Team, f"SELECT * FROM {team_table} WHERE id IN ({', '.join('%s' for _ in ids)})", ids
        )
    }
    for task in claimed:
        task.team = teams_by_id[task.team_id]
        task.claim_may_resume = bool(task.claim_may_resume)
    return claimed


def may_resume(task_table: str) -> str:
    """A column for the claiming UPDATE's RETURNING: whether the task has a question not yet
    resumed. A task that never paused has none, so `resume_for` need not look (one query
    less per task). Questions are written before their task is pending again."""
    question_table = connection.ops.quote_name(UserQuestion._meta.db_table)
    return (
        f"EXISTS (SELECT 1 FROM {question_table} u"
        f" WHERE u.task_id = {task_table}.id AND u.resumed_at IS NULL) AS claim_may_resume"
    )


def _lock_statement() -> str:
    """Statement 1 under the lock: the candidate teams' rows, at most `limit` of them, each
    with its cap, skipping those another worker holds."""
    _, team_table, _ = _tables()
    return f"""
            SELECT t.*, c.cap AS claim_cap
              FROM {team_table} t
              JOIN unnest(%s::bigint[], %s::int[]) WITH ORDINALITY AS c(team_id, cap, ord)
                ON c.team_id = t.id
             ORDER BY c.ord
             LIMIT %s
               FOR UPDATE OF t SKIP LOCKED
            """


def _pick_statement() -> str:
    """Statement 2 under the lock: each held team's best pending tasks up to its free slots,
    marked running and read back."""
    task_table, _, lock_table = _tables()
    # The UPDATE finds its picks by key alone. They are pending for sure: each was locked
    # with its status checked on its latest version, and stays locked to the commit. A
    # `status = 'pending'` test there let the planner reach them through a pending index,
    # and, with statistics that thought few tasks were pending, it hashed the picks and read
    # every pending task to find them (13,867 rows, 11 ms a claim, in the queue benchmark).
    return f"""
            WITH free AS (
                SELECT c.team_id,
                       c.cap - (SELECT count(*) FROM {task_table} r
                                 WHERE r.team_id = c.team_id AND r.status = 'running') AS slots
                  FROM unnest(%s::bigint[], %s::int[]) AS c(team_id, cap)
                 WHERE NOT EXISTS (SELECT 1 FROM {lock_table} o
                                    WHERE o.team_id = c.team_id AND o.expires_at > %s)
            ), pick AS (
                SELECT p.id
                  FROM free f
                 CROSS JOIN LATERAL (
                       SELECT t.id, t.priority, t.created_at
                         FROM {task_table} t
                        WHERE t.team_id = f.team_id AND t.status = 'pending'
                          AND (t.run_after IS NULL OR t.run_after <= %s)
                        ORDER BY t.priority, t.created_at, t.id
                        LIMIT least(greatest(f.slots, 0), %s)
                          FOR UPDATE OF t SKIP LOCKED
                       ) p
                 ORDER BY p.priority, p.created_at, p.id
                 LIMIT %s
            )
            UPDATE {task_table} AS q
               SET status = 'running', lease_owner = %s, lease_expires_at = %s,
                   started_at = %s, attempts = q.attempts + 1
             WHERE q.id = ANY (ARRAY(SELECT id FROM pick))
            RETURNING q.*, {may_resume("q")}"""


def _claim_postgres(
    teams: list[tuple[int, int, int]],
    *,
    worker: str,
    limit: int,
    commit: bool = False,
    statements: tuple[str, str] | None = None,
) -> list[Task]:
    """The claimed tasks, read back by the claiming UPDATE itself and given the team rows
    the lock read: no further query. `commit`: end the transaction (one the caller opened
    with a BEGIN of its own) in the UPDATE's query. `statements`: the lock's and the pick's
    text as `prepared` gave them before that BEGIN (a statement is prepared only between
    transactions)."""
    lock, pick = statements or (prepared(_lock_statement()), prepared(_pick_statement()))
    team_ids = [t for t, _c, _f in teams]
    caps = [c for _t, c, _f in teams]
    # At most `limit` teams are locked: a worker that wants few tasks leaves the other
    # teams to the other workers.
    locked = {team.pk: team for team in raw_rows(Team, lock, [team_ids, caps, limit])}
    if not locked:
        if commit:
            send("COMMIT")
        return []
    # Read once the teams are held: claim times are then in claim order within a team.
    now = timezone.now()
    claimed = raw_rows(
        Task,
        f"{pick}; COMMIT" if commit else pick,
        [
            list(locked),
            [team.claim_cap for team in locked.values()],
            now,
            now,
            # No team gives more than the batch takes: each row picked here is locked, and a
            # team with 100 free slots had 100 rows locked (and their locks WAL-logged) for
            # a batch of 8.
            limit,
            limit,
            worker,
            lease_until(now),
            now,
        ],
    )
    for task in claimed:
        task.team = locked[task.team_id]
    return claimed


def end_held(task_id: int, worker: str, fields: dict) -> int:
    """One UPDATE, written once rather than compiled by the ORM for every task. By default
    it waits for the WAL flush like every other commit. With OPENHIVE_QUEUE_SYNC_FINISH=false
    (an operator's choice of throughput: one fsync per task caps a worker at a few hundred
    tasks a second) PostgreSQL commits it without waiting: a database crash in the next
    fraction of a second can then lose the end, and the task, still running under its lease,
    is put back by the reaper -- it runs again (its work may be repeated), it is never lost."""
    prefix = source = ""
    if connection.vendor == "postgresql" and not settings.OPENHIVE["QUEUE_SYNC_FINISH"]:
        prefix = f"WITH async AS ({NO_FLUSH_WAIT}) "
        source = "FROM async "
    sql, params = end_held_statement(task_id, worker, fields, prefix=prefix, source=source)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def end_held_statement(
    task_id: int, worker: str, fields: dict, *, prefix: str = "", source: str = ""
) -> tuple[str, list]:
    """The UPDATE that writes `fields` on the task only while `worker` still holds it
    (`prefix`: a WITH clause before it; `source`: a FROM clause that clause needs)."""
    ops = connection.ops
    table = ops.quote_name(Task._meta.db_table)
    values = [ops.adapt_datetimefield_value(v) if isinstance(v, datetime) else v
              for v in fields.values()]  # fmt: skip
    assignments = ", ".join(f"{ops.quote_name(name)} = %s" for name in fields)
    return (
        prepared(
            f"{prefix}UPDATE {table} SET {assignments} {source}"
            "WHERE id = %s AND status = %s AND lease_owner = %s"
        ),
        [*values, task_id, Task.Status.RUNNING, worker],
    )

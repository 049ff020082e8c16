"""Admission of daily-op sessions: per-team concurrency caps and the org-op mutex, held in the
database so every worker process on every machine sees the same state.

A claim is serialized per team: on PostgreSQL by locking the team's row (`FOR UPDATE`, or
`FOR UPDATE SKIP LOCKED` when a worker may simply try another team), on SQLite by taking the
database write lock at BEGIN (IMMEDIATE transactions). Inside that section the claim counts the
team's running tasks, checks the org-op lock and takes the best pending task, so the cap, the
mutex and the priority order hold however many workers race."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from openhive.core.compiled import raw_rows, rows_here, to_rows
from openhive.core.context import ToolContext
from openhive.core.db import reconnecting, statements_in_one_query
from openhive.core.errors import Conflict
from openhive.core.prepared import again_if_statements_lost, prepared
from teams.models import Team

from ..models import OrgOpLock, Task
from ..selectors import team_cap
from ..timing import lease_until
from .claims import claim_begin, held_since_now, may_resume, rolled_back_on_error, send


def _is_postgres() -> bool:
    return connection.vendor == "postgresql"


@contextlib.contextmanager
def team_critical_section(team_id: int, *, skip_locked: bool) -> Iterator[bool]:
    """A transaction that holds the team's claim section: yields True, or False when another
    process holds it and `skip_locked` asked not to wait (PostgreSQL only)."""
    with transaction.atomic():
        yield _enter_section(team_id, skip_locked=skip_locked) is not None


def _enter_section(team_id: int, *, skip_locked: bool, begin: str = "") -> Team | None:
    """Inside a transaction: the team's row, locked on PostgreSQL (None when the team is gone,
    or held by another process and `skip_locked`). SQLite's transaction is IMMEDIATE
    (settings): it holds the database write lock from BEGIN, so the counts and the claim that
    follow act on the latest state, one process at a time. `begin`: a statement sent first in
    the same query (the transaction's BEGIN)."""
    lock = ""
    if _is_postgres():
        lock = " FOR UPDATE SKIP LOCKED" if skip_locked else " FOR UPDATE"
    table = connection.ops.quote_name(Team._meta.db_table)
    found = raw_rows(Team, f"{begin}SELECT * FROM {table} WHERE id = %s{lock}", [team_id])
    return found[0] if found else None


def _org_op_and_running(team_id: int, now: datetime) -> tuple[bool, int]:
    """Whether an org-op holds the team's mutex, and how many of its tasks run: one query,
    read inside the team's claim section (after its lock, so it sees every claim before)."""
    task_table, lock_table = _quoted(Task), _quoted(OrgOpLock)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {lock_table} WHERE team_id = %s AND expires_at > %s),"
            f" (SELECT count(*) FROM {task_table} WHERE team_id = %s AND status = %s)",
            [team_id, connection.ops.adapt_datetimefield_value(now), team_id,
             Task.Status.RUNNING],
        )  # fmt: skip
        held, running = cursor.fetchone()
    return bool(held), int(running)


def _quoted(model: type) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _claim_statement(*, exact: bool) -> str:
    """Claim the team's best ready pending task (or exactly the given one) if the team has a
    free slot and no org-op holds it: one UPDATE, returning the claimed row (and whether a
    question of it may wait to be resumed, so `resume_for` need not look). Written by hand:
    the ORM compiled these queries anew at every claim, which cost more than running them.

    The pick is pending for sure (locked with its status checked on its latest version, on
    PostgreSQL; under the write lock, on SQLite), so the UPDATE finds it by key alone: a
    `status = 'pending'` test there let a plan made while the queue was nearly empty (a
    prepared statement's generic plan) reach it through the pending index by its last column,
    reading every pending task at every claim once thousands were queued."""
    task_table, lock_table = _quoted(Task), _quoted(OrgOpLock)
    skip = " FOR UPDATE SKIP LOCKED" if _is_postgres() else ""
    return f"""
        UPDATE {task_table}
           SET status = 'running', lease_owner = %s, lease_expires_at = %s, started_at = %s,
               attempts = attempts + 1
         WHERE NOT EXISTS (SELECT 1 FROM {lock_table} o WHERE o.team_id = %s AND o.expires_at > %s)
           AND (SELECT count(*) FROM {task_table} r
                 WHERE r.team_id = %s AND r.status = 'running') < %s
           AND id = (SELECT p.id FROM {task_table} p
                      WHERE p.team_id = %s AND p.status = 'pending'
                        AND (p.run_after IS NULL OR p.run_after <= %s)
                        {"AND p.id = %s" if exact else ""}
                      ORDER BY p.priority, p.created_at, p.id
                      LIMIT 1{skip})
        RETURNING *, {may_resume(task_table)}"""


@reconnecting
def task_claim_next(
    *,
    team_id: int,
    team_name: str,
    worker: str,
    task_id: int | None = None,
    skip_locked: bool = False,
) -> Task | None:
    """Claim the team's best pending task (priority, then FIFO) for `worker` -- or exactly
    `task_id` when given -- if the team has a free daily-op slot and no org-op holds its
    mutex; else None (the task waits). The task comes with its team; like a batch claim's, it
    carries when its claim proved it held (`claims.held_since_now`)."""
    cap = team_cap(team_name)
    # Before any BEGIN: a statement is prepared only between transactions.
    statement = prepared(_claim_statement(exact=task_id is not None))
    if named_claims_in_two_trips():
        claimed = _claim_in_two_trips(
            statement, team_id, worker, cap, task_id, skip_locked=skip_locked
        )
        if claimed is None:
            return None
        team, claimed = claimed
    else:
        with transaction.atomic():
            team = _enter_section(team_id, skip_locked=skip_locked)
            if team is None:
                return None
            claimed = raw_rows(Task, statement, _claim_params(team_id, worker, cap, task_id))
    return _held(claimed, team)


def _held(claimed: list[Task], team: Team) -> Task | None:
    """The claiming UPDATE's row, with its team and when its claim proved it held."""
    if not claimed:
        return None
    task = claimed[0]
    task.team = team
    task.claim_may_resume = bool(task.claim_may_resume)
    return held_since_now([task])[0]


def _claim_params(team_id: int, worker: str, cap: int, task_id: int | None) -> list:
    """The claiming UPDATE's parameters; made inside the team's section where the claim takes
    two trips, so that the claim times it writes are ordered per team."""
    now = timezone.now()
    at = connection.ops.adapt_datetimefield_value(now)
    params = [worker, connection.ops.adapt_datetimefield_value(lease_until(now)), at,
              team_id, at, team_id, cap, team_id, at]  # fmt: skip
    if task_id is not None:
        params.append(task_id)
    return params


def _claim_in_two_trips(
    statement: str,
    team_id: int,
    worker: str,
    cap: int,
    task_id: int | None,
    *,
    skip_locked: bool,
) -> tuple[Team, list[Task]] | None:
    """PostgreSQL: the same transaction, its BEGIN sent with the team's lock and its COMMIT
    with the claiming UPDATE, in two round trips where Django's transaction took four. The
    UPDATE is still a statement of its own after the lock: it sees every claim committed
    before the lock was granted. None when the team is gone or (`skip_locked`) held."""
    with rolled_back_on_error():
        team = _enter_section(team_id, skip_locked=skip_locked, begin=claim_begin())
        if team is None:
            send("COMMIT")
            return None
        params = _claim_params(team_id, worker, cap, task_id)
        return team, raw_rows(Task, f"{statement}; COMMIT", params)


@dataclass
class NamedClaim:
    """What claiming one named task came to: the task claimed (with its team), or None when
    it was not (`found`: whether it was there and pending; then its team was full or under an
    org-op); the team's name and the task's options either way (its trace carrier); and when
    the claim began (`time.time_ns()`, for the claim's span, which starts once they are read)."""

    task: Task | None
    found: bool
    team_name: str = ""
    options: dict = field(default_factory=dict)
    started_ns: int = 0


@reconnecting
@again_if_statements_lost
def task_claim_named(
    *, task_id: int, worker: str, team: tuple[int, str] | None = None
) -> NamedClaim:
    """Claim exactly `task_id` for `worker`, as `task_claim_next` does (the team's free slot,
    no org-op), on PostgreSQL in two round trips where reading the task, locking its team and
    claiming took three: the task's team, status and options are read by the statement that
    locks the team, sent with the BEGIN; the claiming UPDATE goes with the COMMIT.

    `team`: the task's team (id, name) as the dispatcher read it. Its cap is then known
    before the lock, and the lock, the UPDATE and the COMMIT travel in one round trip. The
    UPDATE is still a statement of its own after the lock's: PostgreSQL gives each statement
    of a query its own snapshot, taken when it starts, so it sees every claim committed before
    the lock was granted. A task whose team is not that one is claimed the two-trip way."""
    started_ns = time.time_ns()
    # Before the BEGIN: a statement is prepared only between transactions.
    statement = prepared(_claim_statement(exact=True))
    lock = prepared(_named_lock_statement())
    if team is not None:
        claim = _claim_named_in_one_trip(task_id, worker, team, lock, statement, started_ns)
        if claim is not None:
            return claim
    with rolled_back_on_error():
        found = raw_rows(Team, f"{claim_begin()}{lock}", [task_id])
        if not found or found[0].claim_status != Task.Status.PENDING:
            send("COMMIT")
            return NamedClaim(None, False, started_ns=started_ns)
        team_row = found[0]
        params = _claim_params(team_row.pk, worker, team_cap(team_row.name), task_id)
        claimed = raw_rows(Task, f"{statement}; COMMIT", params)
    return _named(team_row, claimed, started_ns)


def _named_lock_statement() -> str:
    """The task's team locked, read with the task's status and options."""
    return (
        f"SELECT tm.*, t.status AS claim_status, t.options AS claim_options"
        f" FROM {_quoted(Task)} t JOIN {_quoted(Team)} tm ON tm.id = t.team_id"
        f" WHERE t.id = %s FOR UPDATE OF tm"
    )


def _claim_named_in_one_trip(
    task_id: int, worker: str, team: tuple[int, str], lock: str, statement: str, started_ns: int
) -> NamedClaim | None:
    """None when the task's team is not `team` (nothing was claimed then). The claim time is
    read before the lock is granted: two claims racing for one team may write theirs in the
    other order, by at most the wait for the lock."""
    team_id, team_name = team
    params = [task_id, *_claim_params(team_id, worker, team_cap(team_name), task_id)]
    with rolled_back_on_error(), connection.cursor() as cursor:
        cursor.execute(f"{claim_begin()}{lock}; {statement}; COMMIT", params)
        to_rows(cursor)  # past the BEGIN (and the SET)
        found = rows_here(Team, cursor)
        cursor.nextset()
        claimed = rows_here(Task, cursor)
    if not found or found[0].claim_status != Task.Status.PENDING:
        return NamedClaim(None, False, started_ns=started_ns)
    if found[0].pk != team_id:  # the UPDATE looked in that team only
        return None
    return _named(found[0], claimed, started_ns)


def _named(team: Team, claimed: list[Task], started_ns: int) -> NamedClaim:
    options = Task._meta.get_field("options").from_db_value(team.claim_options, None, connection)
    options = options if isinstance(options, dict) else {}
    return NamedClaim(_held(claimed, team), True, team.name, options, started_ns)


def named_claims_in_two_trips() -> bool:
    """Whether `task_claim_named` may be used: PostgreSQL taking several statements in one
    query, outside a caller's transaction."""
    return statements_in_one_query() and not connection.in_atomic_block


def task_admit_running(
    *, team: Team, text: str, worker: str, type: str, created_by: str = "", **fields
) -> Task:
    """Create a task that starts at once (a synchronous query): it takes a daily-op slot of
    the team like any claimed task, or raises `Conflict(code="saturated")` when none is free."""
    cap = team_cap(team.name)
    with team_critical_section(team.pk, skip_locked=False):
        now = timezone.now()
        op_held, running = _org_op_and_running(team.pk, now)
        if op_held:
            raise Conflict(
                f'team "{team.name}" is busy with an org operation; try again shortly',
                code="org_op_pending",
            )
        if running >= cap:
            raise Conflict(
                f'team "{team.name}" is saturated ({running}/{cap} daily-ops running); '
                "try again later",
                code="saturated",
            )
        return Task.objects.create(
            team=team,
            text=text,
            type=type,
            status=Task.Status.RUNNING,
            lease_owner=worker,
            lease_expires_at=lease_until(now),
            started_at=now,
            attempts=1,
            created_by=created_by,
            **fields,
        )


# --- the org-op mutex -------------------------------------------------------------------------


@contextlib.contextmanager
def org_op(
    *, team: Team, holder: str, operation: str, own_task_id: int | None = None
) -> Iterator[None]:
    """Run an org-op on `team` alone: take its mutex (new daily-ops wait from now on), let
    in-flight daily-ops drain, yield, release. The caller's own task (the session asking for
    the org-op) is not waited for. Raises `Conflict` if the mutex or the drain takes longer
    than `ORG_OP_DRAIN_SECONDS`."""
    conf = settings.OPENHIVE
    deadline = time.monotonic() + conf["ORG_OP_DRAIN_SECONDS"]
    poll = conf["ORG_OP_POLL_SECONDS"]
    while not _org_op_acquire(team=team, holder=holder, operation=operation):
        if time.monotonic() > deadline:
            raise Conflict(
                f'another org operation holds team "{team.name}"; try again shortly',
                code="org_op_pending",
            )
        time.sleep(poll)
    try:
        while True:
            in_flight = Task.objects.filter(team=team, status=Task.Status.RUNNING)
            if own_task_id is not None:
                in_flight = in_flight.exclude(pk=own_task_id)
            if not in_flight.exists():
                break
            if time.monotonic() > deadline:
                raise Conflict(
                    f'team "{team.name}" still has {in_flight.count()} running task(s) after '
                    f"{conf['ORG_OP_DRAIN_SECONDS']} s; the org operation was not run",
                    code="drain_timeout",
                )
            time.sleep(poll)
        yield
    finally:
        OrgOpLock.objects.filter(team=team, holder=holder).delete()


def _org_op_acquire(*, team: Team, holder: str, operation: str) -> bool:
    now = timezone.now()
    expires = now + timedelta(seconds=settings.OPENHIVE["ORG_OP_DRAIN_SECONDS"] + 600)
    with team_critical_section(team.pk, skip_locked=False):
        current = OrgOpLock.objects.filter(team=team).first()
        if current is not None and current.expires_at > now and current.holder != holder:
            return False
        if current is not None:
            current.delete()  # expired: its holder died
        OrgOpLock.objects.create(
            team=team, holder=holder, operation=operation, acquired_at=now, expires_at=expires
        )
    return True


@contextlib.contextmanager
def caller_org_op(ctx: ToolContext, operation: str) -> Iterator[None]:
    """Run an org tool under the caller team's org-op mutex (new daily-ops of the team wait,
    in-flight ones drain; the calling session's own task is not waited for)."""
    holder = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{ctx.session_id}"
    with org_op(team=ctx.team, holder=holder, operation=operation, own_task_id=ctx.task_id):
        yield

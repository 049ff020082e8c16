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
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, F, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from openhive.core.context import ToolContext
from openhive.core.db import reconnecting
from openhive.core.errors import Conflict
from teams.models import Team

from ..models import OrgOpLock, Task
from ..selectors import team_cap
from ..timing import lease_until, ready_q


def _is_postgres() -> bool:
    return connection.vendor == "postgresql"


@contextlib.contextmanager
def team_critical_section(team_id: int, *, skip_locked: bool) -> Iterator[bool]:
    """A transaction that holds the team's claim section: yields True, or False when another
    process holds it and `skip_locked` asked not to wait (PostgreSQL only)."""
    with transaction.atomic():
        if _is_postgres():
            rows = Team.objects.filter(pk=team_id).select_for_update(skip_locked=skip_locked)
            yield rows.values_list("pk", flat=True).first() is not None
            return
        # SQLite: the transaction is IMMEDIATE (settings), so it holds the database write lock
        # from BEGIN: the count and the claim act on the latest state, one process at a time.
        yield True


def _org_op_and_running(team_id: int, now: datetime) -> tuple[bool, int]:
    """Whether an org-op holds the team's mutex, and how many of its tasks run: one query,
    read inside the team's claim section (after its lock, so it sees every claim before)."""
    held = OrgOpLock.objects.filter(team_id=team_id, expires_at__gt=now)
    running = (
        Task.objects.filter(team_id=team_id, status=Task.Status.RUNNING)
        .order_by()
        .values("team_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    row = (
        Team.objects.filter(pk=team_id)
        .annotate(held=Exists(held), running=Coalesce(Subquery(running), 0))
        .values_list("held", "running")
        .first()
    )
    return (bool(row[0]), int(row[1])) if row is not None else (False, 0)


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
    mutex; else None (the task waits)."""
    cap = team_cap(team_name)
    claimed_id = None
    with team_critical_section(team_id, skip_locked=skip_locked) as held:
        if not held:
            return None
        now = timezone.now()  # read inside the section: claim times are ordered per team
        op_held, running = _org_op_and_running(team_id, now)
        if op_held or running >= cap:
            return None
        pending = (
            Task.objects.filter(team_id=team_id, status=Task.Status.PENDING)
            .filter(ready_q(now))
            .order_by("priority", "created_at", "id")
        )
        if task_id is not None:
            pending = pending.filter(pk=task_id)
        if _is_postgres():
            pending = pending.select_for_update(skip_locked=True)
        claimed_id = pending.values_list("id", flat=True).first()
        if claimed_id is None:
            return None
        Task.objects.filter(pk=claimed_id, status=Task.Status.PENDING).update(
            status=Task.Status.RUNNING,
            lease_owner=worker,
            lease_expires_at=lease_until(now),
            started_at=now,
            attempts=F("attempts") + 1,
        )
    return Task.objects.select_related("team", "topic").get(pk=claimed_id)


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

"""Reads of the task queue for the API, the admin and commands."""

from __future__ import annotations

import os
from datetime import datetime

from django.db import connection
from django.db.models import Count, QuerySet
from django.utils import timezone

from openhive.core import paths
from openhive.core.prepared import prepared
from openhive.core.scrubbing import scrub
from openhive.engine.models import Session
from teams.config import TeamConfig, read_team_config
from teams.models import Team

from .models import OrgOpLock, Task, TaskTodo, UserQuestion
from .timing import redispatch_cutoff

STALE_IN_FLIGHT_MS = 600_000
_CAP_CACHE: dict[str, tuple[tuple[int, int], int]] = {}
DEFAULT_CAP = TeamConfig.model_fields["max_concurrent_daily_ops"].default


def team_cap(name: str) -> int:
    """`max_concurrent_daily_ops` from the team's config.yaml, re-read when the file changes.
    Every claim asks for each candidate team: the check is one stat."""
    path = paths.team_file(name, "config.yaml")
    try:
        stat = os.stat(path)
        version = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        version = (-1, -1)
    cached = _CAP_CACHE.get(path)
    if cached is not None and cached[0] == version:
        return cached[1]
    try:
        cap = read_team_config(name).max_concurrent_daily_ops
    except Exception:  # a broken config must not stop the queue: fall back to the default
        cap = DEFAULT_CAP
    _CAP_CACHE[path] = (version, cap)
    return cap


# Ids are 64-bit; anything outside can name no row (and some backends refuse to bind it).
MAX_ID = 2**63 - 1


def task_list(
    *,
    team: Team | None = None,
    status: str | None = None,
    type: str | None = None,
    priority: int | None = None,
) -> QuerySet[Task]:
    """Tasks matching every given filter, newest first."""
    rows = Task.objects.select_related("team").order_by("-created_at", "-id")
    if team is not None:
        rows = rows.filter(team=team)
    if status is not None:
        rows = rows.filter(status=status)
    if type is not None:
        rows = rows.filter(type=type)
    if priority is not None:
        rows = rows.filter(priority=priority)
    return rows


def task_get(*, task_id: int) -> Task | None:
    if not 0 < task_id <= MAX_ID:
        return None
    return Task.objects.select_related("team").filter(pk=task_id).first()


def task_to_claim(*, task_id: int) -> tuple[int, str, str, dict] | None:
    """What a worker handed one task needs before it claims it: (team id, team name, status,
    options). Hand-written: compiling the ORM's join cost more than running it, every task."""
    task_table = connection.ops.quote_name(Task._meta.db_table)
    team_table = connection.ops.quote_name(Team._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            prepared(
                f"SELECT t.team_id, tm.name, t.status, t.options FROM {task_table} t"
                f" JOIN {team_table} tm ON tm.id = t.team_id WHERE t.id = %s"
            ),
            [task_id],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    options = Task._meta.get_field("options").from_db_value(row[3], None, connection)
    return row[0], row[1], row[2], options if isinstance(options, dict) else {}


def task_sessions(*, task: Task) -> list[Session]:
    """The sessions that worked on a task, oldest first (a retried task has several)."""
    return list(Session.objects.filter(task=task).order_by("started_at", "id"))


def task_todos(*, task_id: int) -> list[TaskTodo]:
    """A task's todo list in its order."""
    return list(TaskTodo.objects.filter(task_id=task_id).order_by("position", "id"))


def todo_dict(todo: TaskTodo) -> dict:
    """A todo as the tools and the API show it; the text is the model's and may quote a secret."""
    return {
        "id": todo.pk,
        "position": todo.position,
        "text": scrub(todo.text),
        "done": todo.done,
        "completed_at": todo.completed_at.isoformat() if todo.completed_at else None,
    }


def task_counts_by_status(*, team: Team | None = None) -> dict[str, int]:
    """Every status with its count (zero included), for one team or all."""
    rows = Task.objects.all() if team is None else Task.objects.filter(team=team)
    counts = dict(rows.order_by().values_list("status").annotate(n=Count("id")))
    return {status: counts.get(status, 0) for status in Task.Status.values}


PENDING_SHOWN = 20


def team_status(team: Team) -> dict:
    """Live queue state of one team (get_status): running daily-ops against the cap, whether
    an org-op holds the mutex, pending work only (finished history is not queue depth)."""
    cap = team_cap(team.name)
    running = list(
        Task.objects.filter(team=team, status=Task.Status.RUNNING).order_by("started_at", "id")
    )
    pending = Task.objects.filter(team=team, status=Task.Status.PENDING).order_by(
        "priority", "created_at", "id"
    )
    current = running[0] if running else None
    if current is None:
        current_task = None
    elif current.type == Task.Type.BOOTSTRAP:
        current_task = "(initializing)"
    else:
        current_task = current.text[:200]
    return {
        "team": team.name,
        "status": team.status,
        "active_daily_ops": len(running),
        "max_concurrent_daily_ops": cap,
        "saturation": len(running) >= cap,
        "org_op_pending": OrgOpLock.objects.filter(
            team=team, expires_at__gt=timezone.now()
        ).exists(),
        "queue_depth": pending.count(),
        "current_task": current_task,
        "pending_tasks": [
            {
                "task_id": t.pk,
                "type": t.type,
                "priority": t.priority_name,
                "text": t.text[:200],
                "created_at": t.created_at.isoformat(),
            }
            for t in pending[:PENDING_SHOWN]
        ],
    }


def tasks_running_count() -> int:
    # Team by team, each team's running tasks found in the team-status index: asked for all
    # at once, both databases read that whole index (every task ever run) at every tick.
    task_table = connection.ops.quote_name(Task._meta.db_table)
    team_table = connection.ops.quote_name(Team._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT coalesce(sum((SELECT count(*) FROM {task_table} r
                                      WHERE r.team_id = tm.id AND r.status = 'running')), 0)
                  FROM {team_table} tm"""
        )
        return int(cursor.fetchone()[0])


def dispatched_unclaimed_count(*, now: datetime) -> int:
    # `dispatched_at > …` implies it is set: the count reads the small handed-out index.
    return Task.objects.filter(
        status=Task.Status.PENDING, dispatched_at__gt=redispatch_cutoff(now)
    ).count()


def _ready_head(team: str, limit: str, *, undispatched: bool) -> str:
    """SELECT of a team's ready pending tasks (id, priority, created_at), most urgent first,
    read in order from the team's pending index. `team` and `limit` are SQL (a column or a
    placeholder); then its parameters: now[, the redispatch cutoff when `undispatched`:
    leave out tasks handed out since]."""
    task_table = connection.ops.quote_name(Task._meta.db_table)
    fresh = " AND (p.dispatched_at IS NULL OR p.dispatched_at <= %s)" if undispatched else ""
    return f"""SELECT p.id, p.priority, p.created_at FROM {task_table} p
                WHERE p.team_id = {team} AND p.status = 'pending'
                  AND (p.run_after IS NULL OR p.run_after <= %s){fresh}
                ORDER BY p.priority, p.created_at, p.id
                LIMIT {limit}"""


def best_task_join(team_id: str, *, undispatched: bool = False) -> str:
    """SQL joining each team (its id column: `team_id`) to its best ready pending task as
    `h` (priority, created_at, id); a team without one drops out. One probe per team,
    however deep the queue. Parameters: those of `_ready_head`."""
    best = _ready_head(team_id, "1", undispatched=undispatched)
    if connection.vendor == "postgresql":
        return f"CROSS JOIN LATERAL ({best}) h"
    # SQLite has no LATERAL: the best task's key, then the row. (PostgreSQL would instead
    # scan the task table and run the lookup for every row.)
    task_table = connection.ops.quote_name(Task._meta.db_table)
    return f"JOIN {task_table} h ON h.id = (SELECT id FROM ({best}))"


def running_and_held(team_id: str) -> str:
    """Two SQL columns for the team whose id column is `team_id`: its running tasks (found in
    the team-status index), and whether an org-op holds it (its parameter: now)."""
    task_table = connection.ops.quote_name(Task._meta.db_table)
    lock_table = connection.ops.quote_name(OrgOpLock._meta.db_table)
    return f"""(SELECT count(*) FROM {task_table} r
                 WHERE r.team_id = {team_id} AND r.status = 'running'),
               EXISTS (SELECT 1 FROM {lock_table} o
                        WHERE o.team_id = {team_id} AND o.expires_at > %s)"""


def team_room(*, now: datetime) -> list[tuple[int, str, int]]:
    """(team id, team name, free slots) of each team with ready work not handed out yet, the
    team whose best such task is most urgent first: its cap less its running tasks and those
    handed out but not yet claimed; 0 under an org-op. One query that reads each team's head,
    running and handed-out tasks, never the whole queue (with 20,000 queued the tick spent
    ~50 ms reading it)."""
    task_table = connection.ops.quote_name(Task._meta.db_table)
    team_table = connection.ops.quote_name(Team._meta.db_table)
    at = connection.ops.adapt_datetimefield_value(now)
    stale = connection.ops.adapt_datetimefield_value(redispatch_cutoff(now))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT tm.id, tm.name, {running_and_held("tm.id")},
                       (SELECT count(*) FROM {task_table} d
                         WHERE d.team_id = tm.id AND d.status = 'pending'
                           AND d.dispatched_at > %s)
                  FROM {team_table} tm
                  {best_task_join("tm.id", undispatched=True)}
                 ORDER BY h.priority, h.created_at, h.id""",
            [at, stale, at, stale],
        )
        rows = cursor.fetchall()
    return [
        (pk, name, 0 if held else max(0, team_cap(name) - running - handed))
        for pk, name, running, held, handed in rows
    ]


def tasks_admissible(*, now: datetime, limit: int) -> list[int]:
    """Pending, not recently handed out, in strict priority then FIFO order, at most as many
    per team as it has free slots."""
    return [task_id for task_id, _team_id, _name in tasks_to_hand_out(now=now, limit=limit)]


def tasks_to_hand_out(*, now: datetime, limit: int) -> list[tuple[int, int, str]]:
    """`tasks_admissible`, each with its team's id and name: a worker told them claims the
    task in one round trip (`task_claim_named`)."""
    rooms = team_room(now=now)
    names = {pk: name for pk, name, _free in rooms}
    picked = _most_urgent_with_teams(
        [(pk, free) for pk, _name, free in rooms],
        now=now,
        limit=limit,
        cutoff=redispatch_cutoff(now),
    )
    return [(task_id, team_id, names[team_id]) for task_id, team_id in picked]


def most_urgent_of_teams(
    room: list[tuple[int, int]], *, now: datetime, limit: int, cutoff: datetime | None = None
) -> list[int]:
    """The ids of the `limit` most urgent ready pending tasks of the teams in `room` ((team
    id, free slots), the team whose best task is most urgent first), at most a team's free
    slots of each, in one query: each team's read in order from its pending index and cut
    there. `cutoff`: leave out tasks handed out since."""
    picked = _most_urgent_with_teams(room, now=now, limit=limit, cutoff=cutoff)
    return [task_id for task_id, _team_id in picked]


def _most_urgent_with_teams(
    room: list[tuple[int, int]], *, now: datetime, limit: int, cutoff: datetime | None
) -> list[tuple[int, int]]:
    """`most_urgent_of_teams` as (task id, team id)."""
    # Those tasks belong to at most `limit` teams: the first ones with room (each one's best
    # task is admissible, so it ranks before any task of a later team).
    room = [(team_id, min(free, limit)) for team_id, free in room if free > 0][:limit]
    if not room:
        return []
    at = connection.ops.adapt_datetimefield_value(now)
    extra = [connection.ops.adapt_datetimefield_value(cutoff)] if cutoff else []
    head = _ready_head("%s", "%s", undispatched=cutoff is not None)
    # Each head is one team's: its place in `room` says which.
    heads = " UNION ALL ".join(
        f"SELECT h{n}.*, {n} AS room FROM ({head}) AS h{n}" for n in range(len(room))
    )
    params = [value for team_id, free in room for value in (team_id, at, *extra, free)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, room FROM ({heads}) AS heads ORDER BY priority, created_at, id LIMIT %s",
            [*params, limit],
        )
        return [(task_id, room[place][0]) for task_id, place in cursor.fetchall()]


def in_flight_tasks(*, team: Team) -> list[dict]:
    """The team's unfinished work (pending, running, or waiting for a person), most urgent
    first (the overlap policies' view)."""
    now = timezone.now()
    rows = Task.objects.filter(
        team=team,
        status__in=[
            Task.Status.PENDING,
            Task.Status.RUNNING,
            Task.Status.WAITING_FOR_USER,
            Task.Status.WAITING_FOR_APPROVAL,
        ],
    ).order_by("-status", "priority", "created_at", "id")
    out = []
    for t in rows:
        age_ms = int((now - t.created_at).total_seconds() * 1000)
        entry = {"task_id": t.pk, "type": t.type, "status": t.status, "age_ms": age_ms}
        if t.correlation_id:
            entry["correlation_id"] = t.correlation_id
        if age_ms > STALE_IN_FLIGHT_MS:
            entry["stale"] = True
        out.append(entry)
    return out


def task_questions(*, task_id: int) -> list[UserQuestion]:
    """What the task asked and how each ended, oldest first (the pending one last)."""
    return list(
        UserQuestion.objects.filter(task_id=task_id)
        .select_related("team")
        .order_by("created_at", "id")
    )


def questions_waiting(*, team=None) -> QuerySet[UserQuestion]:
    """Open questions and approval requests, oldest first: what people still have to answer."""
    rows = UserQuestion.objects.filter(state=UserQuestion.State.PENDING).select_related(
        "team", "task"
    )
    if team is not None:
        rows = rows.filter(team=team)
    return rows.order_by("created_at", "id")

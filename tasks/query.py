"""Synchronous queries of child teams (query_team, query_teams). Each query is a session of the
child that takes one of its daily-op slots, as a task created running (type `query`), so it
counts against the cap, shows in get_status and can be cancelled like any task. A fan-out runs
its children in parallel threads: wall-clock is the slowest child, not the sum."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from openhive.core.errors import DomainError
from openhive.core.scrubbing import scrub
from openhive.engine.lineage import current_origin
from openhive.engine.models import Session
from teams.agent import run_team_session
from teams.models import Team

from .models import Task
from .querypool import run_parallel
from .runner import still_held_check, worker_id
from .services import task_admit_running, task_cancel, task_finish

logger = logging.getLogger(__name__)

MAX_FAN_OUT = 5


@dataclass
class QueryOutcome:
    team: str
    ok: bool
    result_or_error: str


def query_child(
    *,
    child: Team,
    query: str,
    caller: str,
    timeout_ms: int,
    source_channel: str = "",
    parent_cancelled: Callable[[], bool] | None = None,
) -> QueryOutcome:
    """Run one session of `child` on `query` and return its answer. Never raises. The
    calling session (if any) is the child session's parent, in the database and the trace."""
    worker = f"{worker_id()}:query"
    origin = current_origin()
    try:
        task = task_admit_running(
            team=child,
            text=query,
            worker=worker,
            type=Task.Type.QUERY,
            created_by=caller,
            source_channel="",
        )
    except DomainError as exc:
        return QueryOutcome(child.name, False, exc.message)
    held = still_held_check(task.pk, worker)

    def should_cancel() -> bool:
        return (parent_cancelled is not None and parent_cancelled()) or held()

    outcome = run_team_session(
        child,
        query,
        kind=Session.Kind.TASK,
        task_id=task.pk,
        source_channel=source_channel,
        actor=caller,
        should_cancel=should_cancel,
        timeout_seconds=timeout_ms / 1000,
        origin=origin,
    )
    answer = (outcome.content or "").strip()
    if outcome.ok and answer:
        status, text = Task.Status.DONE, answer
    elif outcome.ok:
        status, text = Task.Status.FAILED, "team returned an empty response"
    elif outcome.stop_reason == Session.StopReason.TIMEOUT:
        status, text = Task.Status.FAILED, f"timeout after {timeout_ms} ms"
    elif outcome.stop_reason == Session.StopReason.CANCELLED:
        status, text = Task.Status.CANCELLED, "cancelled"
    else:
        status, text = Task.Status.FAILED, outcome.error or outcome.stop_reason
    if status == Task.Status.CANCELLED:
        # Record the stop on our own row unless someone else already ended it.
        with contextlib.suppress(DomainError):
            task_cancel(task_id=task.pk, reason="query cancelled")
    else:
        task_finish(
            task_id=task.pk,
            worker=worker,
            status=status,
            result=text,
            stop_reason=outcome.stop_reason,
            held=task,  # the row as admitted: the end is one conditional UPDATE
        )
    return QueryOutcome(child.name, status == Task.Status.DONE, scrub(text))


def query_children(
    *,
    targets: list[tuple[Team, str, int]],
    caller: str,
    source_channel: str = "",
    parent_cancelled: Callable[[], bool] | None = None,
) -> list[QueryOutcome]:
    """Fan out (child, query, timeout_ms) in parallel; results in the order of `targets`. One
    child's failure does not fail the others."""

    def one(target: tuple[Team, str, int]) -> QueryOutcome:
        child, query, timeout_ms = target
        try:
            return query_child(
                child=child,
                query=query,
                caller=caller,
                timeout_ms=timeout_ms,
                source_channel=source_channel,
                parent_cancelled=parent_cancelled,
            )
        except Exception as exc:  # one child's crash is its own result, not the fan-out's
            logger.exception("query of %s failed", child.name)
            return QueryOutcome(child.name, False, f"query failed: {type(exc).__name__}")

    if len(targets) == 1:
        return [one(targets[0])]
    # Each thread runs in a copy of the caller's context: the calling session stays the parent
    # of every child session, in the database and in the trace.
    return run_parallel([lambda target=target: one(target) for target in targets])

"""What a django-q2 worker executes: `run_task(task_id)`. The task row is the truth; this
function claims it, keeps its lease alive while the team's session runs, and records the end."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.db import connection

from openhive.core.compiled import CompiledQuery
from openhive.core.db import RESET_ERRORS, keep_connection_if_sound, reconnecting, reconnects
from openhive.core.prepared import prepared
from openhive.engine import stopping, tracing
from openhive.engine.budgets import TriggerWindow, window_since
from openhive.engine.models import Session
from openhive.engine.spec import SessionOutcome, outcome_text
from teams.agent import run_team_session
from teams.skills import SkillInvalid, SkillNotFound, load_skills, with_skill
from teams.subagents import load_subagents

from . import leases
from .finisher import current_finisher
from .models import Task
from .selectors import task_to_claim
from .services import (
    task_claim_next,
    task_defer,
    task_finish,
    task_hand_back,
    task_release_dispatch,
)
from .services.admission import named_claims_in_two_trips, task_claim_named
from .services.claims import batch_owner, task_claim_batch
from .services.session_ends import EndWithSession
from .services.waiting import resume_for, task_wait

# `_execute`'s word for a task put back in the queue to wait for its model provider.
DEFERRED = "deferred"
# ... and for a task that now waits for a person (its session paused; see services.waiting).
WAITING = "waiting"

logger = logging.getLogger(__name__)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def run_task(task_id: int, team_id: int | None = None, team_name: str = "") -> str:
    """Returns a short word for django-q2's own record; the real result is on the task row.
    The dispatcher hands out tasks in priority order and within each team's free slots; the
    claim checks the cap and the org-op mutex again, as other processes may have claimed.
    `team_id` and `team_name`: the task's team as the dispatcher read it (a claim in one round
    trip on PostgreSQL); a task handed out without them is claimed all the same."""
    keep_connection_if_sound()
    worker = worker_id()
    if named_claims_in_two_trips():
        team = (team_id, team_name) if team_id is not None and team_name else None
        return _run_named(task_id, worker, team)
    row = task_to_claim(task_id=task_id)
    if row is None or row[2] != Task.Status.PENDING:
        return "not-claimed"
    team_id, team_name, _status, options = row
    with tracing.queue_claim_span(
        team=team_name, task_id=task_id, carrier=options.get("trace")
    ) as span:
        task = task_claim_next(team_id=team_id, team_name=team_name, worker=worker, task_id=task_id)
        span.set_attribute("openhive.claimed", task is not None)
        _continue_trace(task)
    if task is None:
        # The team is full or under an org-op: the task waits and is handed out again.
        task_release_dispatch(task_id=task_id)
        return "not-admitted"
    return run_claimed(task, worker)


def _run_named(task_id: int, worker: str, team: tuple[int, str] | None) -> str:
    """`run_task` on PostgreSQL: the claim reads the task with its team's lock
    (`task_claim_named`), and its span, begun when the claim did, is made once the task's
    trace carrier is read."""
    claim = task_claim_named(task_id=task_id, worker=worker, team=team)
    if not claim.found:
        return "not-claimed"
    with tracing.queue_claim_span(
        team=claim.team_name,
        task_id=task_id,
        carrier=claim.options.get("trace"),
        start_time=claim.started_ns,
    ) as span:
        span.set_attribute("openhive.claimed", claim.task is not None)
        _continue_trace(claim.task)
    if claim.task is None:
        task_release_dispatch(task_id=task_id)
        return "not-admitted"
    return run_claimed(claim.task, worker)


def run_next_task(worker: str | None = None) -> str | None:
    """Claim the most urgent admissible task of any team and run it in this thread; None
    when there is nothing to run. (`manage.py openhive worker` claims in batches for all its
    threads at once: `tasks.pull`.) `worker` prefixes the lease owner, which is unique to
    this claim."""
    owner = f"{worker}:{uuid.uuid4().hex[:8]}" if worker else batch_owner()
    before = reconnects()
    claimed = task_claim_batch(worker=owner, limit=1)
    if not claimed:
        if reconnects() != before:
            _release_unheard_claims(owner)
        return None
    return run_pulled(claimed[0], owner)


def run_pulled(task: Task, worker: str) -> str:
    """Run a task a pull worker claimed: its claim span continues the trace of whoever
    queued it, then the session runs under it."""
    with tracing.queue_claim_span(
        team=task.team.name, task_id=task.pk, carrier=(task.options or {}).get("trace")
    ) as span:
        span.set_attribute("openhive.claimed", True)
        _continue_trace(task)
    started = time.monotonic()
    status = run_claimed(task, worker)
    # One line per task, for the operator watching a `worker`.
    logger.info(
        "task #%d (%s) %s in %.1f s", task.pk, task.team.name, status, time.monotonic() - started
    )
    return status


def _release_unheard_claims(worker: str) -> None:
    """A claim whose commit reached the database but whose reply was lost with the connection
    leaves a task running under this claim's owner that nobody runs: it goes straight back."""
    for task_id in Task.objects.filter(status=Task.Status.RUNNING, lease_owner=worker).values_list(
        "id", flat=True
    ):
        task_hand_back(task_id=task_id, worker=worker, reason="claim reply lost with the link")


def _continue_trace(task: Task | None) -> None:
    """Called inside the claim span: the task's session becomes its child, so the trace reads
    parent's tool call → queue claim → session."""
    if task is not None:
        task.claim_trace = tracing.inject()


def run_claimed(task: Task, worker: str) -> str:
    """Run a task this worker holds: renew its lease meanwhile, record the end -- with the
    session's own end where it can (`EndWithSession`: no commit of its own, which also beat a
    pull worker's group commit of ends, ~10 % more real sessions a second on PostgreSQL)."""
    task_id = task.pk
    stop_reason = ""
    end = EndWithSession(task, worker) if EndWithSession.fits(task) else None
    try:
        with leases.renewed(task_id, worker):
            status, result, stop_reason = _execute(task, worker, end)
    except RESET_ERRORS as exc:
        # The database went away for longer than the reconnects covered: not the task's
        # failure. Hand it back (once the database answers again) rather than fail it.
        logger.warning(
            "task %s interrupted: database unavailable (%s)", task_id, exc, exc_info=True
        )
        _hand_back_when_possible(task_id, worker, f"the database connection was lost: {exc}")
        return Task.Status.PENDING
    except Exception as exc:  # never leave a claimed task running: record the failure
        logger.exception("task %s crashed", task_id)
        status, result = Task.Status.FAILED, f"Error: {type(exc).__name__}: {exc}"
    if status == DEFERRED:
        return Task.Status.PENDING
    if status == WAITING:
        return Task.objects.filter(pk=task_id).values_list("status", flat=True).first() or status
    if end is not None and end.closed is not None:
        finished = end.settle()
    else:
        finished = record_end(task, worker, status=status, result=result, stop_reason=stop_reason)
    if finished is None:  # cancelled, or lost to the reaper: that status stands
        return Task.objects.filter(pk=task_id).values_list("status", flat=True).first() or status
    return finished.status


def record_end(
    task: Task, worker: str, *, status: str, result: str, stop_reason: str = ""
) -> Task | None:
    """The end of a task this worker holds: written with the other ends of the moment when
    this thread belongs to a pull worker (group commit, see `tasks.finisher`), else alone.
    Either way it returns once the end is committed."""
    finisher = current_finisher()
    if finisher is not None:
        return finisher.finish(task, worker=worker, status=status, result=result,
                               stop_reason=stop_reason)  # fmt: skip
    return task_finish(task_id=task.pk, worker=worker, status=status, result=result,
                       stop_reason=stop_reason, held=task)  # fmt: skip


def _execute(task: Task, worker: str, end: EndWithSession | None) -> tuple[str, str, str]:
    if task.type == Task.Type.BOOTSTRAP and task.team.bootstrapped:
        return Task.Status.DONE, "already bootstrapped", ""
    try:
        content, skills = task_content(task)
    except (SkillNotFound, SkillInvalid) as exc:
        return Task.Status.FAILED, f"Error: the task's skill cannot be used: {exc.message}", ""
    outcome = run_team_session(
        task.team,
        content,
        kind=Session.Kind.TASK,
        task_id=task.pk,
        topic_id=task.topic_id,
        topic_name=task.topic.name if task.topic_id else None,
        max_turns=task.options.get("max_turns"),
        source_channel=task.source_channel,
        should_cancel=still_held_check(task.pk, worker, held=getattr(task, "held_since", None)),
        timeout_seconds=settings.TASK_TIMEOUT_SECONDS,
        origin={**task.options, "trace": getattr(task, "claim_trace", None) or {}},
        trigger_window=trigger_window_of(task),
        # A trigger that names a subagent runs it directly: no orchestrator call decides.
        subagent=str(task.options.get("subagent") or "") or None,
        skills=skills,
        # A task whose session paused for a person continues that session.
        resume=resume_for(task),
        closing=end,
    )
    if end is not None:
        end.closed = outcome.closed
    if outcome.pause is not None:
        task_wait(
            task_id=task.pk, worker=worker, session_id=outcome.session_id, pause=outcome.pause
        )
        return WAITING, "", outcome.stop_reason
    if outcome.transient:
        return _provider_down(task, worker, outcome)
    if outcome.ok and task.type == Task.Type.BOOTSTRAP:
        problems = bootstrap_problems(task.team)
        if problems:
            text = "The bootstrap left files that cannot be used: " + "; ".join(problems)
            return Task.Status.FAILED, text, outcome.stop_reason
    status = Task.Status.DONE if outcome.ok else Task.Status.FAILED
    return status, outcome_text(outcome), outcome.stop_reason


def bootstrap_problems(team) -> list[str]:
    """What makes a finished bootstrap unusable, checked in code rather than trusted to the
    model: a subagent or skill file that does not load would silently never be used."""
    _found, problems = load_subagents(team.name)
    return problems + [p.describe() for p in load_skills(team.name).problems]


def task_content(task: Task) -> tuple[str, list[str]]:
    """The text the session starts from, and the skills given with it: a task that names a
    skill (a trigger's `skill`) carries that skill's instructions to the run."""
    skill = task.options.get("skill")
    if not isinstance(skill, str) or not skill:
        return task.text, []
    return with_skill(task.team.name, skill, task.text), [skill]


def _provider_down(task: Task, worker: str, outcome: SessionOutcome) -> tuple[str, str, str]:
    """The provider and its fallbacks stayed down: back to the queue with a delay, a bounded
    number of times, then failed with the reason."""
    reason = outcome.error or outcome.content
    if task_defer(task_id=task.pk, worker=worker, reason=reason, retry_after=outcome.retry_after):
        return DEFERRED, "", outcome.stop_reason
    text = f"{outcome_text(outcome)} (put back {task.defer_count} time(s) already; giving up)"
    return Task.Status.FAILED, text, outcome.stop_reason


def trigger_window_of(task: Task) -> TriggerWindow | None:
    """The watch window a trigger's task belongs to (its window budgets), from the options
    the trigger stored with it."""
    opened = window_since(task.options.get("window_opened_at"))
    trigger_id = task.options.get("trigger_id")
    if opened is None or not isinstance(trigger_id, int):
        return None
    return TriggerWindow(trigger_id=trigger_id, opened_at=opened)


def still_held_check(
    task_id: int, worker: str, *, held: tuple[float, int] | None = None
) -> Callable[[], bool]:
    """`should_cancel` for a session: True once the task is no longer running for this worker
    (cancelled, replaced, or reaped and handed to another), so it never runs twice at once.
    `held`: when (monotonic) and at which stop generation its claim proved it held. The
    first read, if within CANCEL_FRESH_SECONDS of that and no stop was asked in this process
    since, is the claim's (one query less per task): a cancel by another process in that
    moment is then seen by the next read, as one just after any read is."""

    # Read before model calls: the query is compiled once per process, not at each task.
    sql, params = _RUNNING_OWNER.sql(task_id=task_id)
    proof = [held]

    @reconnecting
    def should_cancel() -> bool:
        claimed, proof[0] = proof[0], None
        if claimed is not None:
            at, generation = claimed
            fresh = time.monotonic() - at < settings.OPENHIVE["CANCEL_FRESH_SECONDS"]
            if fresh and stopping.generation() == generation:
                return False
        with connection.cursor() as cursor:
            cursor.execute(prepared(sql), params)
            row = cursor.fetchone()
        return row is None or row[0] != worker

    return should_cancel


_RUNNING_OWNER = CompiledQuery(
    lambda task_id: (
        Task.objects.filter(pk=task_id, status=Task.Status.RUNNING)
        .order_by()
        .values_list("lease_owner")[:1]
    )
)


def _hand_back_when_possible(task_id: int, worker: str, reason: str) -> None:
    try:
        task_hand_back(task_id=task_id, worker=worker, reason=reason[:500])
    except RESET_ERRORS:  # the lease will expire and the reaper hands it back instead
        logger.warning("task %s could not be handed back; its lease will expire", task_id)

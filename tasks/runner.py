"""What a django-q2 worker executes: `run_task(task_id)`. The task row is the truth; this
function claims it, keeps its lease alive while the team's session runs, and records the end."""

from __future__ import annotations

import logging
import os
import socket
import threading

from django.conf import settings
from django.db import close_old_connections

from openhive.engine.models import Session
from openhive.engine.session import SessionRequest, outcome_text, run_session

from .models import Task
from .services import task_claim, task_finish, task_renew_lease

logger = logging.getLogger(__name__)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def run_task(task_id: int) -> str:
    """Returns a short word for django-q2's own record; the real result is on the task row."""
    close_old_connections()
    worker = worker_id()
    task = task_claim(task_id=task_id, worker=worker)
    if task is None:
        return "not-claimed"
    stop_renewing = threading.Event()
    renewer = threading.Thread(
        target=_renew_until, args=(task_id, worker, stop_renewing), daemon=True
    )
    renewer.start()
    try:
        status, result = _execute(task)
    except Exception as exc:  # never leave a claimed task running: record the failure
        logger.exception("task %s crashed", task_id)
        status, result = Task.Status.FAILED, f"Error: {type(exc).__name__}: {exc}"
    finally:
        stop_renewing.set()
        renewer.join(timeout=5)
    task_finish(task_id=task_id, worker=worker, status=status, result=result)
    return status


def _execute(task: Task) -> tuple[str, str]:
    if task.type == Task.Type.BOOTSTRAP and task.team.bootstrapped:
        return Task.Status.DONE, "already bootstrapped"
    outcome = run_session(
        SessionRequest(
            team=task.team,
            content=task.text,
            kind=Session.Kind.TASK,
            task=task,
            topic=task.topic,
            max_turns=task.options.get("max_turns"),
            source_channel=task.source_channel,
            should_cancel=lambda: _is_cancelled(task.pk),
            timeout_seconds=settings.TASK_TIMEOUT_SECONDS,
        )
    )
    status = Task.Status.DONE if outcome.ok else Task.Status.FAILED
    return status, outcome_text(outcome)


def _is_cancelled(task_id: int) -> bool:
    return Task.objects.filter(pk=task_id, status=Task.Status.CANCELLED).exists()


def _renew_until(task_id: int, worker: str, stop: threading.Event) -> None:
    interval = max(1.0, settings.OPENHIVE["LEASE_SECONDS"] / 3)
    try:
        while not stop.wait(interval):
            if not task_renew_lease(task_id=task_id, worker=worker):
                return
    finally:
        close_old_connections()

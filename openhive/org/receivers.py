"""A finished bootstrap completes the team: its per-subagent learning and reflection triggers
are seeded and what it was built with is recorded with the task."""

from __future__ import annotations

from openhive.engine.models import Session
from tasks.models import Task
from tasks.services import task_note_result
from tasks.signals import finished_receiver

from .services import team_bootstrap_record


@finished_receiver(Task.Type.BOOTSTRAP, dispatch_uid="org-bootstrap-finished")
def on_bootstrap_finished(*, task: Task, **kwargs) -> None:
    """Runs inside the transaction that records the task's end: the seeded triggers and the
    record commit with the team's `bootstrapped` flag, or not at all."""
    if task.type != Task.Type.BOOTSTRAP or task.status != Task.Status.DONE:
        return
    if task.stop_reason != Session.StopReason.COMPLETED:
        return  # no session ran (the team was bootstrapped already): nothing new to record
    record = team_bootstrap_record(team=task.team)
    task_note_result(task=task, note=record.summary())

"""A task's end written by its own session, in the transaction of the session's end
(`SessionRequest.closing`): one commit and one round trip fewer per task, and the two ends are
durable together. Only an end that writes nothing but the task's row (`ends_alone`) goes this
way; any other -- a pause, a provider down, a chat to tell, a budget to escalate -- is recorded
after the session as before (`tasks.runner.record_end`)."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from openhive.engine.spec import ClosingWrite, SessionOutcome, outcome_text

from ..models import Task
from .claims import end_held_statement
from .ends import after_end, ends_alone
from .queue import REREAD_ON_FINISH, held_end_fields


class EndWithSession:
    """The end of a task `worker` holds, offered to its session; `settle` after the session."""

    def __init__(self, task: Task, worker: str) -> None:
        self.task, self.worker = task, worker
        self.fields: dict | None = None
        # The rows the session's end changed with it (the runner sets it from the outcome);
        # None when the end was not written with the session.
        self.closed: int | None = None

    @staticmethod
    def fits(task: Task) -> bool:
        """Whether the task's end can be written with its session: not one whose end reads
        what its session may change (a bootstrap's attempts, a trigger run's options)."""
        return task.type not in REREAD_ON_FINISH

    def __call__(self, outcome: SessionOutcome) -> ClosingWrite | None:
        if outcome.pause is not None or outcome.transient:
            return None  # the task waits or goes back to the queue: not an end
        status = Task.Status.DONE if outcome.ok else Task.Status.FAILED
        result, reason = outcome_text(outcome), outcome.stop_reason
        if not ends_alone(self.task, status=status, result=result, stop_reason=reason):
            return None
        fields = held_end_fields(
            self.task, status=status, result=result, now=timezone.now(), stop_reason=reason
        )
        sql, params = end_held_statement(self.task.pk, self.worker, fields)
        self.fields = fields
        # Durable like the end written apart, unless the operator traded that for throughput
        # (OPENHIVE_QUEUE_SYNC_FINISH=false; see `claims.end_held`).
        return ClosingWrite(sql, params, durable=settings.OPENHIVE["QUEUE_SYNC_FINISH"])

    def settle(self) -> Task | None:
        """The task as its session ended it (and `task_finished` sent), or None when the
        worker no longer held it: cancelled or reaped meanwhile, that status stands."""
        if not self.closed or self.fields is None:
            return None
        for name, value in self.fields.items():
            setattr(self.task, name, value)
        after_end(self.task, status=self.fields["status"], stop_reason=self.fields["stop_reason"])
        return self.task

"""Periodic queue jobs on the leading engine loop: the stall detector. Thresholds come from
settings (OPENHIVE_STALL_*), so tests and small deployments can run them in seconds."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from openhive.chat.models import OutboxMessage
from openhive.chat.services import outbox_put
from openhive.core.jobs import clock_job
from teams.models import TeamMessage
from teams.services import teammessage_send

from .models import Task
from .services import task_mark_stall_escalated, tasks_reap_expired_leases
from .services.waiting import questions_expire

logger = logging.getLogger("tasks.stalls")
LOG_LINES = 50  # per run and level; the stats carry the full counts


REAP_EVERY_SECONDS = 5.0


@clock_job("reap-expired-leases", every_seconds=REAP_EVERY_SECONDS, order=10)
def reap_expired_leases(now: datetime) -> dict:
    return tasks_reap_expired_leases(now=now)


@clock_job("question-timeouts", every_seconds=REAP_EVERY_SECONDS, order=15)
def expire_questions(now: datetime) -> dict:
    """A task waiting for a person longer than its team's `ask_user.timeout_seconds` gets
    the default answer or fails."""
    return questions_expire(now=now)


@clock_job("stall-detector", every_seconds=settings.OPENHIVE["STALL_CHECK_SECONDS"], order=30)
def detect_stalls(now: datetime) -> dict:
    """Pending work older than STALL_WARN_SECONDS is a warning; pending or running work older
    than STALL_ERROR_SECONDS is an error, escalated once to the team's parent (from main: to
    the chat that asked for it)."""
    conf = settings.OPENHIVE
    warn_before = now - timedelta(seconds=conf["STALL_WARN_SECONDS"])
    error_before = now - timedelta(seconds=conf["STALL_ERROR_SECONDS"])
    errors = Task.objects.filter(
        Q(status=Task.Status.PENDING, created_at__lt=error_before)
        | Q(status=Task.Status.RUNNING, started_at__lt=error_before)
    ).select_related("team", "team__parent")
    warnings = Task.objects.filter(
        status=Task.Status.PENDING, created_at__lt=warn_before, created_at__gte=error_before
    ).select_related("team")
    n_warn = n_error = escalated = 0
    for task in warnings.order_by("created_at")[: LOG_LINES * 20]:
        n_warn += 1
        if n_warn <= LOG_LINES:
            logger.warning(
                "task stalled >%s: #%s team=%s type=%s age_hours=%.2f",
                _span(conf["STALL_WARN_SECONDS"]),
                task.pk,
                task.team.name,
                task.type,
                (now - task.created_at).total_seconds() / 3600,
            )
    for task in errors.order_by("created_at"):
        n_error += 1
        since = task.started_at if task.status == Task.Status.RUNNING else task.created_at
        if n_error <= LOG_LINES:
            logger.error(
                "task stalled >%s: #%s team=%s type=%s status=%s age_hours=%.2f",
                _span(conf["STALL_ERROR_SECONDS"]),
                task.pk,
                task.team.name,
                task.type,
                task.status,
                (now - since).total_seconds() / 3600,
            )
        if not task.options.get("stall_escalated"):
            escalated += _escalate(task, now - since)
    return {"stalled_warning": n_warn, "stalled_error": n_error, "stalled_escalated": escalated}


def _span(seconds: float) -> str:
    return f"{seconds / 3600:g}h" if seconds >= 3600 else f"{seconds:g}s"


def _escalate(task: Task, age: timedelta) -> int:
    text = (
        f"Task #{task.pk} ({task.type}) of team {task.team.name} has been {task.status} for "
        f"{age.total_seconds() / 3600:.1f} h: {task.text[:200]}"
    )
    with transaction.atomic():
        if not task_mark_stall_escalated(task_id=task.pk):
            return 0
        if task.team.parent is not None:
            teammessage_send(
                sender=task.team,
                recipient=task.team.parent,
                content=text,
                kind=TeamMessage.Kind.ESCALATION,
                reason="stalled task",
                correlation_id=f"stall:{task.pk}",
            )
        elif task.source_channel:
            outbox_put(
                channel_id=task.source_channel,
                topic_id=task.topic_id,
                team_name=task.team.name,
                content=f"[{task.team.name}] Stalled: {text}",
                task_id=task.pk,
                kind=OutboxMessage.Kind.ESCALATION,
                task_status=task.status,
            )
    return 1

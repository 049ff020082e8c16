"""Reads of the task queue for the API, the admin and commands."""

from __future__ import annotations

from django.db.models import QuerySet

from openhive.engine.models import Session
from teams.models import Team

from .models import Task

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


def task_sessions(*, task: Task) -> list[Session]:
    """The sessions that worked on a task, oldest first (a retried task has several)."""
    return list(Session.objects.filter(task=task).order_by("started_at", "id"))

"""Engine reads: the loop's leader, the workers alive, sessions, the tool-call audit, token
totals."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from .models import LEADER, EngineLease, Session, ToolCall, WorkerBeat

# A worker beats every BEAT_SECONDS; one unheard for longer than BEAT_STALE_SECONDS is gone.
BEAT_SECONDS = 2.0
BEAT_STALE_SECONDS = 10.0


def engine_leader() -> EngineLease | None:
    """The current leader, if its lease is still valid."""
    return EngineLease.objects.filter(name=LEADER, expires_at__gte=timezone.now()).first()


def workers_alive(now: datetime | None = None) -> list[WorkerBeat]:
    """The pull workers heard from lately, oldest first."""
    since = (now or timezone.now()) - timedelta(seconds=BEAT_STALE_SECONDS)
    return list(WorkerBeat.objects.filter(seen_at__gte=since).order_by("started_at", "name"))


def session_tokens(**filters: object) -> int:
    """Prompt plus completion tokens of the sessions matching `filters`."""
    total = Session.objects.filter(**filters).aggregate(
        p=Sum("prompt_tokens"), c=Sum("completion_tokens")
    )
    return (total["p"] or 0) + (total["c"] or 0)


def spend_totals(scopes: dict[str, Q]) -> dict[str, tuple[int, Decimal]]:
    """Tokens and USD of the sessions in each named scope, in one query."""
    if not scopes:
        return {}
    tokens = F("prompt_tokens") + F("completion_tokens")
    aggregates = {}
    for name, scope in scopes.items():
        aggregates[f"{name}__t"] = Sum(tokens, filter=scope)
        aggregates[f"{name}__u"] = Sum("cost_usd", filter=scope)
    combined = Q()
    for scope in scopes.values():
        combined |= scope
    row = Session.objects.filter(combined).aggregate(**aggregates)
    return {name: (int(row[f"{name}__t"] or 0), Decimal(row[f"{name}__u"] or 0)) for name in scopes}


def session_get(*, session_id: int) -> Session | None:
    if not 0 < session_id < 2**63:
        return None
    return Session.objects.select_related("team").filter(pk=session_id).first()


def session_rows(
    *,
    team: str | None = None,
    kind: str | None = None,
    stop_reason: str | None = None,
    task_id: int | None = None,
) -> QuerySet[Session]:
    """Sessions matching every given filter, newest first."""
    rows = Session.objects.select_related("team").order_by("-started_at", "-id")
    if team is not None:
        rows = rows.filter(team__name=team)
    if kind is not None:
        rows = rows.filter(kind=kind)
    if stop_reason is not None:
        rows = rows.filter(stop_reason=stop_reason)
    if task_id is not None:
        rows = rows.filter(task_id=task_id)
    return rows


def audit_rows(
    *,
    team: str | None = None,
    tool: str | None = None,
    success: bool | None = None,
    session_id: int | None = None,
) -> QuerySet[ToolCall]:
    """Tool-call audit rows matching every given filter, newest first."""
    rows = ToolCall.objects.order_by("-created_at", "-id")
    if team is not None:
        rows = rows.filter(team_name=team)
    if tool is not None:
        rows = rows.filter(tool=tool)
    if success is not None:
        rows = rows.filter(success=success)
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    return rows


def engine_overview() -> dict:
    """Sessions, tokens and tool calls at a glance."""
    tokens = Session.objects.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    return {
        "sessions": Session.objects.count(),
        "tokens": {"prompt": tokens["p"] or 0, "completion": tokens["c"] or 0},
        "tool_calls": {
            "total": ToolCall.objects.count(),
            "failed": ToolCall.objects.filter(success=False).count(),
        },
    }


# --- spend: tokens and dollars by team, task, trigger and day -----------------------------------


def _spend(rows: QuerySet) -> QuerySet:
    return rows.annotate(
        tokens=Sum(F("prompt_tokens") + F("completion_tokens")),
        usd=Sum("cost_usd"),
        sessions=Count("id"),
    )


def _window(since, until, team: str | None = None) -> QuerySet[Session]:
    rows = Session.objects.filter(started_at__gte=since, started_at__lt=until)
    return rows.filter(team__name=team) if team else rows


def usage_by_team(*, since, until, team: str | None = None) -> list[dict]:
    rows = _window(since, until, team).order_by().values("team_id", "team__name")
    return [
        {
            "team": r["team__name"],
            "tokens": r["tokens"] or 0,
            "usd": r["usd"] or Decimal(0),
            "sessions": r["sessions"],
        }
        for r in _spend(rows).order_by("-tokens", "team__name")
    ]


def usage_by_task(*, since, until, team: str | None = None, limit: int = 50) -> list[dict]:
    rows = (
        _window(since, until, team)
        .filter(task_id__isnull=False)
        .order_by()
        .values("task_id", "team__name", "task__type")
    )
    return [
        {
            "task_id": r["task_id"],
            "team": r["team__name"],
            "type": r["task__type"],
            "tokens": r["tokens"] or 0,
            "usd": r["usd"] or Decimal(0),
            "sessions": r["sessions"],
        }
        for r in _spend(rows).order_by("-tokens", "-task_id")[:limit]
    ]


def usage_by_trigger(*, since, until, team: str | None = None) -> list[dict]:
    """Sessions of tasks that triggers fired, by the trigger that fired them."""
    rows = (
        _window(since, until, team)
        .filter(task__type="trigger")
        .order_by()
        .values("task__options__trigger_id", "task__options__trigger", "team__name")
    )
    return [
        {
            "trigger_id": r["task__options__trigger_id"],
            "trigger": r["task__options__trigger"],
            "team": r["team__name"],
            "tokens": r["tokens"] or 0,
            "usd": r["usd"] or Decimal(0),
            "sessions": r["sessions"],
        }
        for r in _spend(rows).order_by("-tokens")
    ]


def usage_by_day(*, since, until, team: str | None = None) -> list[dict]:
    rows = (
        _window(since, until, team).annotate(day=TruncDate("started_at")).order_by().values("day")
    )
    return [
        {
            "day": r["day"],
            "tokens": r["tokens"] or 0,
            "usd": r["usd"] or Decimal(0),
            "sessions": r["sessions"],
        }
        for r in _spend(rows).order_by("day")
    ]

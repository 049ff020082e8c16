"""REST: sessions with their LLM exchanges and tool calls (/api/v1/sessions), the tool-call
audit (/api/v1/audit) and an overview for dashboards (/api/v1/overview). Everything stored here
was scrubbed on the way in; it is scrubbed again on the way out, for secrets learned since."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, Sum
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from openhive.engine.providers import providers_configured
from openhive.errors import NotFound
from tasks.models import Task
from teams.models import Team
from vault.scrubbing import get_scrubber

from .models import LlmExchange, Session, ToolCall
from .selectors import engine_leader

router = Router(tags=["sessions"])
audit_router = Router(tags=["audit"])
overview_router = Router(tags=["overview"])

MAX_OFFSET = 1_000_000_000


class SessionBrief(Schema):
    id: int
    team: str
    task_id: int | None
    topic_id: int | None
    kind: str
    model: str
    stop_reason: str
    turns: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    cost_usd: float
    started_at: datetime
    finished_at: datetime | None


class ExchangeOut(Schema):
    turn: int
    request_digest: str
    request_messages: list[Any]
    response: dict[str, Any]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int


class ToolCallOut(Schema):
    id: int
    session_id: int | None
    team: str
    tool: str
    arguments: dict[str, Any]
    success: bool
    result: dict[str, Any]
    error: str
    duration_ms: int
    created_at: datetime


class SessionDetail(SessionBrief):
    error: str
    final_text: str
    exchanges: list[ExchangeOut]
    tool_calls: list[ToolCallOut]


class SessionFilters(Schema):
    team: str | None = Field(None, min_length=1, max_length=64)
    kind: Session.Kind | None = None
    stop_reason: Session.StopReason | None = None
    task_id: int | None = Field(None, ge=1, le=2**62)
    limit: int = Field(50, ge=1, le=200)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)


class AuditFilters(Schema):
    team: str | None = Field(None, min_length=1, max_length=64)
    tool: str | None = Field(None, min_length=1, max_length=100)
    success: bool | None = None
    session_id: int | None = Field(None, ge=1, le=2**62)
    limit: int = Field(50, ge=1, le=200)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)


class Page(Schema):
    count: int
    limit: int
    offset: int


class SessionPage(Page):
    items: list[SessionBrief]


class AuditPage(Page):
    items: list[ToolCallOut]


def session_brief(session: Session) -> dict:
    return {
        "id": session.pk,
        "team": session.team.name,
        "task_id": session.task_id,
        "topic_id": session.topic_id,
        "kind": session.kind,
        "model": session.model,
        "stop_reason": session.stop_reason,
        "turns": session.turns,
        "prompt_tokens": session.prompt_tokens,
        "completion_tokens": session.completion_tokens,
        "tokens": session.prompt_tokens + session.completion_tokens,
        "cost_usd": float(session.cost_usd),
        "started_at": session.started_at,
        "finished_at": session.finished_at,
    }


def _tool_call_out(call: ToolCall) -> dict:
    scrubber = get_scrubber()
    return {
        "id": call.pk,
        "session_id": call.session_id,
        "team": call.team_name,
        "tool": call.tool,
        "arguments": scrubber.data(call.arguments),
        "success": call.success,
        "result": scrubber.data(call.result),
        "error": scrubber.text(call.error),
        "duration_ms": call.duration_ms,
        "created_at": call.created_at,
    }


def _exchange_out(exchange: LlmExchange) -> dict:
    scrubber = get_scrubber()
    return {
        "turn": exchange.turn,
        "request_digest": exchange.request_digest,
        "request_messages": scrubber.data(exchange.request_messages),
        "response": scrubber.data(exchange.response),
        "finish_reason": exchange.finish_reason,
        "prompt_tokens": exchange.prompt_tokens,
        "completion_tokens": exchange.completion_tokens,
        "latency_ms": exchange.latency_ms,
    }


def _page(rows: Any, limit: int, offset: int, serialise: Any) -> dict:
    return {
        "count": rows.count(),
        "limit": limit,
        "offset": offset,
        "items": [serialise(row) for row in rows[offset : offset + limit]],
    }


@router.get("", response=SessionPage, summary="Sessions, newest first")
def sessions_list(request: HttpRequest, filters: Query[SessionFilters]) -> dict:
    rows = Session.objects.select_related("team").order_by("-started_at", "-id")
    if filters.team is not None:
        rows = rows.filter(team__name=filters.team)
    if filters.kind is not None:
        rows = rows.filter(kind=filters.kind)
    if filters.stop_reason is not None:
        rows = rows.filter(stop_reason=filters.stop_reason)
    if filters.task_id is not None:
        rows = rows.filter(task_id=filters.task_id)
    return _page(rows, filters.limit, filters.offset, session_brief)


@router.get("/{session_id}", response=SessionDetail, summary="A session with its exchanges")
def sessions_detail(request: HttpRequest, session_id: int) -> dict:
    session = Session.objects.select_related("team").filter(pk=session_id).first()
    if session is None:
        raise NotFound(f"session {session_id} not found")
    scrubber = get_scrubber()
    return {
        **session_brief(session),
        "error": scrubber.text(session.error),
        "final_text": scrubber.text(session.final_text),
        "exchanges": [_exchange_out(e) for e in session.exchanges.order_by("turn")],
        "tool_calls": [_tool_call_out(c) for c in session.tool_calls.order_by("id")],
    }


@audit_router.get("", response=AuditPage, summary="Tool calls, newest first")
def audit_list(request: HttpRequest, filters: Query[AuditFilters]) -> dict:
    rows = ToolCall.objects.order_by("-created_at", "-id")
    if filters.team is not None:
        rows = rows.filter(team_name=filters.team)
    if filters.tool is not None:
        rows = rows.filter(tool=filters.tool)
    if filters.success is not None:
        rows = rows.filter(success=filters.success)
    if filters.session_id is not None:
        rows = rows.filter(session_id=filters.session_id)
    return _page(rows, filters.limit, filters.offset, _tool_call_out)


class OverviewOut(Schema):
    teams: int
    tasks: dict[str, int]
    sessions: int
    tokens: dict[str, int]
    tool_calls: dict[str, int]
    provider_configured: bool
    engine_leader: str | None


@overview_router.get("", response=OverviewOut, summary="Counts and health at a glance")
def overview(request: HttpRequest) -> dict:
    by_status = dict(Task.objects.values_list("status").annotate(n=Count("id")))
    tokens = Session.objects.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    leader = engine_leader()
    return {
        "teams": Team.objects.count(),
        "tasks": {status: by_status.get(status, 0) for status in Task.Status.values},
        "sessions": Session.objects.count(),
        "tokens": {"prompt": tokens["p"] or 0, "completion": tokens["c"] or 0},
        "tool_calls": {
            "total": ToolCall.objects.count(),
            "failed": ToolCall.objects.filter(success=False).count(),
        },
        "provider_configured": providers_configured(),
        "engine_leader": leader.holder if leader else None,
    }

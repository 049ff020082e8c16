"""REST: sessions with their LLM exchanges and tool calls (/api/v1/sessions) and the tool-call
audit (/api/v1/audit). Everything stored here was scrubbed on the way in; it is scrubbed again
on the way out, for secrets learned since."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from openhive.core.api import Page
from openhive.core.errors import NotFound
from openhive.core.scrubbing import get_scrubber

from .models import LlmExchange, Session, ToolCall
from .schemas import SessionBrief, session_brief
from .selectors import audit_rows, session_get, session_rows

router = Router(tags=["sessions"])
audit_router = Router(tags=["audit"])

MAX_OFFSET = 1_000_000_000


class ExchangeOut(Schema):
    turn: int
    kind: str
    request_digest: str
    request_start: int | None
    tools: list[str]
    provider_profile: str
    attempts: list[dict[str, Any]]
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


class SessionPage(Page):
    items: list[SessionBrief]


class AuditPage(Page):
    items: list[ToolCallOut]


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
        "kind": exchange.kind,
        "request_digest": exchange.request_digest,
        "request_start": exchange.request_start,
        "tools": exchange.tools,
        "provider_profile": exchange.provider_profile,
        "attempts": scrubber.data(exchange.attempts),
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
    rows = session_rows(
        team=filters.team,
        kind=filters.kind,
        stop_reason=filters.stop_reason,
        task_id=filters.task_id,
    )
    return _page(rows, filters.limit, filters.offset, session_brief)


@router.get("/{session_id}", response=SessionDetail, summary="A session with its exchanges")
def sessions_detail(request: HttpRequest, session_id: int) -> dict:
    session = session_get(session_id=session_id)
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
    rows = audit_rows(
        team=filters.team,
        tool=filters.tool,
        success=filters.success,
        session_id=filters.session_id,
    )
    return _page(rows, filters.limit, filters.offset, _tool_call_out)

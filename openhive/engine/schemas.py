"""Shapes of engine records shared by the REST doors (sessions here, tasks in `tasks.api`)."""

from __future__ import annotations

from datetime import datetime

from ninja import Schema

from .models import Session


class SessionBrief(Schema):
    id: int
    team: str
    task_id: int | None
    topic_id: int | None
    kind: str
    # The subagent a `subagent` session ran as; empty for the team's own sessions.
    agent_name: str
    model: str
    parent_session_id: int | None
    parent_task_id: int | None
    trace_id: str
    stop_reason: str
    turns: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    cost_usd: float
    started_at: datetime
    finished_at: datetime | None


def session_brief(session: Session) -> dict:
    return {
        "id": session.pk,
        "team": session.team.name,
        "task_id": session.task_id,
        "topic_id": session.topic_id,
        "kind": session.kind,
        "agent_name": session.agent_name,
        "model": session.model,
        "parent_session_id": session.parent_session_id,
        "parent_task_id": session.parent_task_id,
        "trace_id": session.trace_id,
        "stop_reason": session.stop_reason,
        "turns": session.turns,
        "prompt_tokens": session.prompt_tokens,
        "completion_tokens": session.completion_tokens,
        "tokens": session.prompt_tokens + session.completion_tokens,
        "cost_usd": float(session.cost_usd),
        "started_at": session.started_at,
        "finished_at": session.finished_at,
    }

"""Engine writes: the leadership lease of the engine loop, and the session records."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from openhive.core.db import reconnecting

from .models import LEADER, EngineLease, LlmExchange, Session, ToolCall


def engine_lead(*, holder: str, now: datetime, ttl_seconds: float) -> bool:
    """Take or keep the leadership; True if `holder` leads until now + ttl."""
    expires = now + timedelta(seconds=ttl_seconds)
    kept = (
        EngineLease.objects.filter(name=LEADER)
        .filter(Q(holder=holder) | Q(expires_at__lt=now))
        .update(holder=holder, expires_at=expires)
    )
    if kept:
        return True
    try:
        with transaction.atomic():
            EngineLease.objects.create(
                name=LEADER, holder=holder, expires_at=expires, acquired_at=now
            )
    except IntegrityError:
        return False
    return True


def engine_resign(*, holder: str) -> None:
    EngineLease.objects.filter(name=LEADER, holder=holder).delete()


# --- sessions: the recorder's writes ------------------------------------------------------------


@reconnecting
def session_open(
    *,
    team_id: int,
    kind: str,
    task_id: int | None = None,
    topic_id: int | None = None,
    parent_session_id: int | None = None,
    parent_task_id: int | None = None,
    trace_id: str = "",
    spec_options: dict | None = None,
) -> Session:
    # A parent that no longer exists (deleted meanwhile) is not a reason to lose the session.
    if parent_session_id and not Session.objects.filter(pk=parent_session_id).exists():
        parent_session_id = None
    tasks = Session._meta.get_field("parent_task").related_model
    if parent_task_id and not tasks.objects.filter(pk=parent_task_id).exists():
        parent_task_id = None
    return Session.objects.create(
        team_id=team_id,
        task_id=task_id,
        topic_id=topic_id,
        kind=kind,
        parent_session_id=parent_session_id,
        parent_task_id=parent_task_id,
        trace_id=trace_id,
        spec_options=spec_options or {},
        # A subagent's session says which one it ran as: the spec options name it (what a
        # replay needs to build the same agent again), the column lets the admin show it.
        agent_name=str((spec_options or {}).get("subagent") or "")[:100],
    )


@reconnecting
@transaction.atomic
def session_record_exchange(
    *,
    session: Session,
    turn: int,
    request_digest: str,
    request_messages: list,
    response: dict,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: Decimal,
    latency_ms: int,
    kind: str = LlmExchange.Kind.STEP,
    step: int | None = None,
    request_start: int | None = None,
    tools: list | None = None,
    tools_digest: str = "",
    provider_profile: str = "",
    attempts: list | None = None,
) -> LlmExchange:
    """One exchange and the session's running totals, in one transaction. `step` is the
    loop's turn for a step (the session's `turns`)."""
    exchange = LlmExchange.objects.create(
        session=session,
        turn=turn,
        kind=kind,
        request_digest=request_digest,
        request_start=request_start,
        request_messages=request_messages,
        tools=tools or [],
        tools_digest=tools_digest,
        provider_profile=provider_profile,
        attempts=attempts or [],
        response=response,
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost_usd,
        latency_ms=latency_ms,
    )
    if step is not None:
        session.turns = step
    session.prompt_tokens += prompt_tokens
    session.completion_tokens += completion_tokens
    session.cost_usd += cost_usd
    session.save(
        update_fields=[
            "turns",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "model",
            "provider_profile",
        ]
    )
    return exchange


@reconnecting
def session_close(*, session: Session, stop_reason: str, final_text: str, error: str) -> Session:
    session.stop_reason = stop_reason
    session.final_text = final_text
    session.error = error
    session.finished_at = timezone.now()
    session.save()
    return session


def sessions_close_abandoned(*, task_ids: list[int], stop_reason: str, error: str) -> int:
    """Close the still-open sessions of tasks whose worker is gone: no row stays `running`
    after the process that ran it has died."""
    if not task_ids:
        return 0
    return Session.objects.filter(task_id__in=task_ids, finished_at__isnull=True).update(
        stop_reason=stop_reason, error=error, finished_at=timezone.now()
    )


@reconnecting
def toolcall_record(
    *,
    session_id: int | None,
    team_id: int | None,
    team_name: str,
    tool: str,
    arguments: dict,
    success: bool,
    result: dict,
    error: str,
    duration_ms: int,
) -> ToolCall:
    """The audit row of one tool call (already scrubbed by the caller). A savepoint: a failed
    insert must not break the caller's transaction (PostgreSQL)."""
    with transaction.atomic():
        return ToolCall.objects.create(
            session_id=session_id,
            team_id=team_id,
            team_name=team_name,
            tool=tool[:100],
            arguments=arguments,
            success=success,
            result=result,
            error=error,
            duration_ms=duration_ms,
        )

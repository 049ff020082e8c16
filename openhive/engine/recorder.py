"""The one recorder of model work: a Session row, one LlmExchange per completion (scrubbed of
every known secret), and the end. The session loop and the topic classifier both record through
it, so every model call anywhere is in the same tables and can be replayed."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal

from openhive.core.scrubbing import Scrubber, get_scrubber

from . import llm
from .model import ModelPort, ResilientModel
from .models import LlmExchange, Session
from .providers import ProviderProfile
from .services import session_close, session_open, session_record_exchange
from .spec import SessionOutcome

Kind = LlmExchange.Kind


def digest(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()


class SessionRecorder:
    def __init__(
        self,
        *,
        team_id: int,
        kind: str,
        task_id: int | None = None,
        topic_id: int | None = None,
        parent_session_id: int | None = None,
        parent_task_id: int | None = None,
        trace_id: str = "",
        spec_options: dict | None = None,
    ) -> None:
        self.session = session_open(
            team_id=team_id,
            kind=kind,
            task_id=task_id,
            topic_id=topic_id,
            parent_session_id=parent_session_id,
            parent_task_id=parent_task_id,
            trace_id=trace_id,
            spec_options=spec_options,
        )
        # Messages of the step request already stored (the next step stores the rest).
        self.recorded_upto = 0
        self.sequence = 0
        # Secret values seen only in tool-call arguments (credentials handed over in a call).
        self.handed_over: list[str] = []

    @property
    def session_id(self) -> int:
        return self.session.pk

    def use_profile(self, profile: ProviderProfile) -> None:
        self.session.model, self.session.provider_profile = profile.model, profile.name

    def scrubber(self) -> Scrubber:
        return get_scrubber().with_extra(self.handed_over)

    def rebase(self, first_changed: int) -> None:
        """The history was rewritten from `first_changed` on (compaction): the next step
        stores its request from there."""
        self.recorded_upto = min(self.recorded_upto, first_changed)

    def exchange(
        self,
        turn: int,
        messages: list[dict],
        reply: llm.Completion,
        *,
        kind: str = Kind.STEP,
        tools: list[dict] | None = None,
        tools_digest: str | None = None,
    ) -> None:
        """Record a completion. A step stores only the messages new since the previous step
        (the whole request is the sum of the rows), a compaction its whole request."""
        scrubber = self.scrubber()
        start = self.recorded_upto if kind == Kind.STEP else 0
        self.sequence += 1
        schemas = tools or []
        session_record_exchange(
            session=self.session,
            turn=self.sequence,
            kind=kind,
            step=turn if kind == Kind.STEP else None,
            request_digest=digest(messages),
            request_start=start,
            request_messages=scrubber.data(messages[start:]),
            tools=[t["function"]["name"] for t in schemas] if kind == Kind.STEP else [],
            tools_digest=(tools_digest or digest(schemas)) if kind == Kind.STEP else "",
            provider_profile=reply.profile,
            attempts=scrubber.data(reply.attempts),
            response=scrubber.data(reply.message),
            finish_reason=reply.finish_reason,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cost_usd=reply.cost_usd,
            latency_ms=reply.latency_ms,
        )
        if kind == Kind.STEP:
            self.recorded_upto = len(messages)

    def failed(self, messages: list[dict], attempts: list[dict], error: str) -> None:
        """A call no retry or fallback could answer: its request and every attempt."""
        scrubber = self.scrubber()
        self.sequence += 1
        session_record_exchange(
            session=self.session,
            turn=self.sequence,
            kind=Kind.FAILED,
            request_digest=digest(messages),
            request_start=self.recorded_upto,
            request_messages=scrubber.data(messages[self.recorded_upto :]),
            attempts=scrubber.data(attempts),
            response={"error": scrubber.text(error)},
            finish_reason="error",
            prompt_tokens=0,
            completion_tokens=0,
            cost_usd=Decimal(0),
            latency_ms=sum(int(a.get("latency_ms") or 0) for a in attempts),
        )

    def finish(
        self, reason: str, content: str, error: str, effects: dict | None = None
    ) -> SessionOutcome:
        # The session may have created secrets: reload, and add those only seen in tool calls.
        scrubber = get_scrubber(refresh=True).with_extra(self.handed_over)
        session = session_close(
            session=self.session,
            stop_reason=reason,
            final_text=scrubber.text(content),
            error=scrubber.text(error),
        )
        return SessionOutcome(
            session.pk, reason, session.final_text, session.error, dict(effects or {})
        )


def complete_once(
    *,
    recorder: SessionRecorder,
    profile: ProviderProfile,
    messages: list[dict],
    agent: str,
    timeout: float | None = None,
    model: ModelPort | None = None,
) -> llm.Completion:
    """One recorded completion without tools (the topic classifier): the exchange and the
    session's end are recorded whether the call succeeds or fails."""
    recorder.use_profile(profile)
    scrubber = recorder.scrubber()
    try:
        reply = (model or ResilientModel()).complete(
            profile, messages, [], agent=agent, timeout=timeout
        )
    except Exception as exc:
        if isinstance(exc, llm.ProviderUnavailable):
            recorder.failed(messages, exc.attempts, str(exc))
        recorder.finish(Session.StopReason.ERROR, "", f"{type(exc).__name__}: {exc}"[:1000])
        raise
    recorder.exchange(1, messages, reply)
    recorder.finish(
        Session.StopReason.COMPLETED, scrubber.text(reply.message.get("content") or "")[:2000], ""
    )
    return reply

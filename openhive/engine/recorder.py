"""The one recorder of model work: a Session row, one LlmExchange per completion (scrubbed of
every known secret), the audit rows of the session's tool calls, and the end. The session loop
and the topic classifier both record through it, so every model call anywhere is in the same
tables and can be replayed.

Writes are gathered and committed together (`flush`): a step's exchange, the audit rows of its
tool calls and the session's totals in one transaction, once the step's tool calls are done and
before the next model call -- or, when steps follow each other faster than the write window
(OPENHIVE_STEP_WRITE_WINDOW_MS), the steps of one window together; the last rows commit with
the session's end. Every way out of a session flushes what is pending (`finish`, or `salvage`
when an error escapes), so a tool call that ran is in the audit unless the process itself dies
within that step or window."""

from __future__ import annotations

import hashlib
import logging
import operator
import time
from collections.abc import Sequence
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from openhive.core import jsontext
from openhive.core.db import RESET_ERRORS
from openhive.core.reads import Read
from openhive.core.scrubbing import Scrubber, get_scrubber

from . import llm, unflushed
from .model import ModelPort, ResilientModel
from .models import LlmExchange, Session
from .providers import ProviderProfile
from .services import (
    STEP_FIELDS,
    session_open,
    session_record_step,
)
from .spec import Closing, ClosingWrite, SessionOutcome

logger = logging.getLogger(__name__)

Kind = LlmExchange.Kind


def digest(messages: list[dict]) -> str:
    return hashlib.sha256(jsontext.canonical(messages).encode()).hexdigest()


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
        reads: Sequence[Read] = (),
        closing: Closing | None = None,
    ) -> None:
        # `reads`: what the session's start needs, sent with its row; answers in `read_answers`.
        self.session, self.read_answers = session_open(
            team_id=team_id,
            kind=kind,
            task_id=task_id,
            topic_id=topic_id,
            parent_session_id=parent_session_id,
            parent_task_id=parent_task_id,
            trace_id=trace_id,
            spec_options=spec_options,
            then=reads,
        )
        # The caller's own end, written with the session's (`SessionRequest.closing`).
        self.closing = closing
        # Messages of the step request already stored (the next step stores the rest).
        self.recorded_upto = 0
        self.sequence = 0
        # Secret values seen only in tool-call arguments (credentials handed over in a call).
        self.handed_over: list[str] = []
        # Written at the next flush: exchanges (the fields of each row) and audit rows.
        self.pending_exchanges: list[dict] = []
        self.pending_calls: list[dict] = []
        self.request_digest = RequestDigest()
        # The last reply, the scrubber that scrubbed it and the result: the reply opens the
        # next step's new messages, scrubbed by the same scrubber unless a secret came since.
        self.last_reply: tuple[dict, Scrubber, object] | None = None
        # The totals the database holds; the difference is the spend not yet written.
        self.flushed = (0, Decimal(0))
        self.flushed_at = time.monotonic()

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
        # The reply's JSON text, made once: the scrubber's screen reads it now, and the next
        # step's digest, where the reply is the first new message of the request.
        reply_text = jsontext.canonical(reply.message)
        response = _clean(scrubber, reply.message, reply_text)
        self.sequence += 1
        schemas = tools or []
        if kind == Kind.STEP:
            self.session.turns = turn
            request_digest = self.request_digest.of(messages)
            new = messages[start:]
            texts = self.request_digest.texts(new)
            request_messages = [
                self._scrubbed(scrubber, m, text) for m, text in zip(new, texts, strict=True)
            ]
            self.request_digest.remember(reply.message, reply_text)
        else:
            request_digest = digest(messages)
            request_messages = [scrubber.data(m) for m in messages]
        self._add_exchange(
            turn=self.sequence,
            kind=kind,
            request_digest=request_digest,
            request_start=start,
            request_messages=request_messages,
            tools=[t["function"]["name"] for t in schemas] if kind == Kind.STEP else [],
            tools_digest=(tools_digest or digest(schemas)) if kind == Kind.STEP else "",
            provider_profile=reply.profile,
            attempts=_clean(scrubber, reply.attempts, None),
            response=response,
            finish_reason=reply.finish_reason,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cost_usd=reply.cost_usd,
            latency_ms=reply.latency_ms,
        )
        if kind == Kind.STEP:
            self.recorded_upto = len(messages)
            self.last_reply = (reply.message, scrubber, response)

    def _scrubbed(self, scrubber: Scrubber, message: dict, text: str | None) -> object:
        last = self.last_reply
        if last is not None and last[0] is message and last[1] is scrubber:
            return last[2]
        return _clean(scrubber, message, text)

    def failed(self, messages: list[dict], attempts: list[dict], error: str) -> None:
        """A call no retry or fallback could answer: its request and every attempt."""
        scrubber = self.scrubber()
        self.sequence += 1
        self._add_exchange(
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

    def _add_exchange(self, **row: object) -> None:
        row["created_at"] = timezone.now()
        self.pending_exchanges.append(row)
        session = self.session
        session.prompt_tokens += int(row["prompt_tokens"])  # type: ignore[call-overload]
        session.completion_tokens += int(row["completion_tokens"])  # type: ignore[call-overload]
        session.cost_usd += row["cost_usd"]  # type: ignore[operator]
        tokens = session.prompt_tokens + session.completion_tokens
        unflushed.note(
            session.pk,
            unflushed.Unflushed(
                task_id=session.task_id,
                team_id=session.team_id,
                tokens=tokens - self.flushed[0],
                usd=session.cost_usd - self.flushed[1],
            ),
        )

    def audit(self, row: dict) -> None:
        """The audit row of a tool call of this session's step (`tool_calls.audit_into`)."""
        # Stamped now, as if written now: the rows keep the time of the call, not of the flush.
        self.pending_calls.append({**row, "created_at": timezone.now()})

    def step_done(self) -> None:
        """A step's tool calls are done: write what is pending, unless the last write is
        younger than OPENHIVE_STEP_WRITE_WINDOW_MS. A model that answers in seconds gets a
        write per step; tool loops that run many quick steps get one per window, not one
        commit per step (the session's end, a pause and every way out write the rest)."""
        window = settings.OPENHIVE["STEP_WRITE_WINDOW_MS"] / 1000
        if time.monotonic() - self.flushed_at >= window:
            self.flush()

    def flush(self, close: dict | None = None, then: ClosingWrite | None = None) -> int | None:
        """Commit what the step left pending, with the session's totals (and `close`, the
        session's end, and `then`, the caller's), in one transaction; the rows `then`
        changed, or None when it was not written (it was not given, or the rows had to be
        written one by one)."""
        if not (self.pending_exchanges or self.pending_calls or close):
            return None
        fields = {name: getattr(self.session, name) for name in STEP_FIELDS} | (close or {})
        exchanges, calls = self.pending_exchanges, self.pending_calls
        self.pending_exchanges, self.pending_calls = [], []
        try:
            closed = session_record_step(
                session=self.session, exchanges=exchanges, tool_calls=calls, fields=fields,
                then=then,
            )  # fmt: skip
        except RESET_ERRORS:
            self.pending_exchanges, self.pending_calls = exchanges, calls
            raise
        except Exception:
            # One bad row (an audit row naming a team deleted meanwhile) must not lose the
            # others: each is written on its own, as before steps were batched.
            logger.exception("session %s: the step could not be written at once", self.session_id)
            self._write_apart(exchanges, calls, fields)
            closed = None
        session = self.session
        self.flushed = (session.prompt_tokens + session.completion_tokens, session.cost_usd)
        self.flushed_at = time.monotonic()
        unflushed.clear(session.pk)
        return closed

    def _write_apart(self, exchanges: list[dict], calls: list[dict], fields: dict) -> None:
        for row in exchanges:
            session_record_step(session=self.session, exchanges=[row], tool_calls=[], fields={})
        for row in calls:
            try:
                session_record_step(session=self.session, exchanges=[], tool_calls=[row], fields={})
            except Exception:
                logger.exception("could not record the audit row for tool %s", row.get("tool"))
        session_record_step(session=self.session, exchanges=[], tool_calls=[], fields=fields)

    def salvage(self) -> None:
        """On a way out that skipped `finish` (the database gone, the process told to stop):
        write what is pending if the database still takes it; never raises."""
        if not (self.pending_exchanges or self.pending_calls):
            return
        try:
            self.flush()
        except BaseException:
            logger.exception(
                "session %s: %d audit row(s) and %d exchange(s) could not be written",
                self.session_id,
                len(self.pending_calls),
                len(self.pending_exchanges),
            )

    def finish(
        self,
        reason: str,
        content: str,
        error: str,
        effects: dict | None = None,
        details: dict | None = None,
    ) -> SessionOutcome:
        """Write the session's end and say how it went. `details`: what a stop adds (a pause,
        a provider down, the budget). The caller's own end (`closing`) is written in the same
        transaction when it gives a statement."""
        # Not reloaded from the database here (the session's start did, one query per session
        # less): every way a secret new since then can reach this text updates the scrubber
        # in this process -- a secret stored here invalidates the cache (`vault_store_secret`),
        # one read from the vault is remembered (`vault_read`), one handed over in a tool call
        # is added -- and a cache older than CACHE_SECONDS is reloaded as everywhere else.
        scrubber = get_scrubber().with_extra(self.handed_over)
        close = {
            "stop_reason": reason,
            "final_text": scrubber.text(content),
            "error": scrubber.text(error),
            "finished_at": timezone.now(),
        }
        details = details or {}
        outcome = SessionOutcome(
            self.session_id,
            reason,
            close["final_text"],
            close["error"],
            dict(effects or {}),
            transient=bool(details.get("transient")),
            retry_after=details.get("retry_after"),
            budget=str(details.get("budget") or ""),
            plain_error=str(details.get("plain") or ""),
            pause=details.get("pause"),
        )
        try:
            outcome.closed = self.flush(close=close, then=self._closing_write(outcome))
        finally:
            unflushed.clear(self.session_id)
        return outcome

    def _closing_write(self, outcome: SessionOutcome) -> ClosingWrite | None:
        if self.closing is None:
            return None
        try:
            return self.closing(outcome)
        except Exception:  # the caller's end is then written apart; the session's still is
            logger.exception("session %s: the caller's end was not prepared", outcome.session_id)
            return None


def _clean(scrubber: Scrubber, value: object, text: str | None) -> object:
    """`scrubber.data(value)`, or `value` itself when its JSON text shows there is nothing to
    scrub (`Scrubber.untouched`): what a step records is not changed afterwards."""
    if text is None:
        text = jsontext.text_or_none(jsontext.dumps, value)
    return value if text is not None and scrubber.untouched(text) else scrubber.data(value)


class RequestDigest:
    """`digest(messages)` of a request that grows between steps, kept as it grows: each
    message is serialised once, not the whole history at every step. A history rewritten
    (compaction) starts it again. The loop appends messages and never edits one."""

    def __init__(self) -> None:
        self.seen: list[dict] = []
        self.hasher = hashlib.sha256(b"[")
        # The canonical text of each message seen, by position; and that of the last reply,
        # made by the recorder before the reply joined the request.
        self.seen_texts: list[str] = []
        self.known: tuple[object, str] | None = None

    def remember(self, message: object, text: str) -> None:
        self.known = (message, text)

    def of(self, messages: list[dict]) -> str:
        seen = self.seen
        # The same objects in the same places (identity, compared in C: a generator here cost
        # more per step the longer the history).
        kept = len(messages) >= len(seen) and all(map(operator.is_, seen, messages))
        if not kept:
            self.seen, self.hasher, self.seen_texts = [], hashlib.sha256(b"["), []
            seen = self.seen
        known = self.known
        # json.dumps of a list is "[" + the items joined by ", " + "]".
        for message in messages[len(seen) :]:
            if seen:
                self.hasher.update(b", ")
            if known is not None and known[0] is message:
                text = known[1]
            else:
                text = jsontext.canonical(message)
            self.hasher.update(text.encode())
            seen.append(message)
            self.seen_texts.append(text)
        done = self.hasher.copy()
        done.update(b"]")
        return done.hexdigest()

    def texts(self, messages: list[dict]) -> list[str | None]:
        """The canonical texts of `messages`, the request's last ones as `of` saw them (None
        for each when they are not)."""
        if not messages:
            return []
        tail = self.seen[-len(messages) :]
        if len(tail) == len(messages) and all(map(operator.is_, tail, messages)):
            return self.seen_texts[-len(messages) :]
        return [None] * len(messages)


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

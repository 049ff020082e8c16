"""A session: one disposable run of one agent spec on one request. Offer the spec's tools,
loop completion → tool calls → results until a final answer or a stop, and record everything
through the recorder. The engine sees ids and the spec, never a team, task or topic row.

Before each model call the loop fits the request into the context window (`compaction`) and
checks the budgets with an estimate of the call (`budgets`); the model port retries and falls
back (`model.ResilientModel`). Spans and log lines of the session carry its ids."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from decimal import Decimal

from django.conf import settings

from openhive.core import jsontext, logcontext, scrubbing
from openhive.core.context import PAUSING_TOOLS, ToolContext
from openhive.core.db import RESET_ERRORS
from openhive.core.errors import DomainError
from openhive.core.scrubbing import get_scrubber, sensitive_values

from . import compaction, handover, llm, stopping, tracing
from .budgets import BudgetExceeded, BudgetGuard, BudgetScope, Estimate, estimate_call
from .lineage import Origin, running
from .model import ModelPort, ResilientModel
from .models import LlmExchange, Session
from .pausing import Paused, approval_gate, pause_state, tool_requested_pause
from .recorder import SessionRecorder, digest
from .spec import AgentSpec, SessionOutcome, SessionRequest
from .tokens import TokenCounter
from .tool_calls import audit_into, call_tool

logger = logging.getLogger(__name__)

Stop = Session.StopReason
SpecSource = AgentSpec | Callable[[], AgentSpec]
ToolRunner = Callable[[ToolContext, str, "str | dict | None"], dict]


class _Stopped(Exception):
    def __init__(self, reason: str, message: str, **details: object) -> None:
        super().__init__(message)
        self.reason = reason
        self.details = details


def run_session(
    request: SessionRequest,
    spec: SpecSource,
    *,
    model: ModelPort | None = None,
    tool_runner: ToolRunner | None = None,
) -> SessionOutcome:
    """Run `spec` on `request`; never raises for the work's own failures. `spec` may be a
    callable, called once the session is recorded, so that a team whose configuration is
    broken still leaves a session that says why. `tool_runner` replaces `call_tool` (replay
    answers world-reaching tools from the record)."""
    with tracing.session_span(
        agent=str(request.team_id),
        team_id=request.team_id,
        task_id=request.task_id,
        kind=request.kind,
        carrier=request.trace,
    ) as span:
        # The scrubber's reload and the caller's reads travel with the session's row.
        secret_reads = scrubbing.refresh_reads()
        preload = request.preload
        recorder = SessionRecorder(
            reads=[*secret_reads, *(preload.reads() if preload is not None else [])],
            team_id=request.team_id,
            kind=request.kind,
            task_id=request.task_id,
            topic_id=request.topic_id,
            parent_session_id=request.parent_session_id,
            parent_task_id=request.parent_task_id,
            trace_id=tracing.trace_id_of(span),
            spec_options=request.spec_options,
            closing=request.closing,
        )
        answers = recorder.read_answers
        scrubbing.refresh_with(answers[: len(secret_reads)])
        if preload is not None:
            preload.take(answers[len(secret_reads) :])
        span.set_attribute("openhive.session_id", recorder.session_id)
        ids = {"session_id": recorder.session_id, "task_id": request.task_id}
        with logcontext.bind(**ids, trace_id=recorder.session.trace_id or None):
            try:
                outcome = _run(request, spec, recorder, model, tool_runner or call_tool, span)
            finally:
                recorder.salvage()  # an error that skipped `finish` keeps the step's audit
        span.set_attribute("openhive.stop_reason", outcome.stop_reason)
        if not outcome.ok:
            span.set_status(tracing.Status(tracing.StatusCode.ERROR, outcome.stop_reason))
        return outcome


def _run(
    request: SessionRequest,
    spec: SpecSource,
    recorder: SessionRecorder,
    model: ModelPort | None,
    tool_runner: ToolRunner,
    span: tracing.Span,
) -> SessionOutcome:
    effects: dict = {}
    watch = None if request.should_cancel is None else handover.Watch()
    made: list[_Loop] = []  # the loop once made (no model call is made before)

    def work() -> SessionOutcome:
        agent = spec() if callable(spec) else spec
        span.update_name(f"invoke_agent {agent.name}")
        span.set_attribute("gen_ai.agent.name", agent.name)
        recorder.use_profile(agent.profile)
        with logcontext.bind(team=agent.name):
            model_port = model or ResilientModel()
            made.append(_Loop(request, agent, recorder, model_port, effects, tool_runner, watch))
            return recorder.finish(Stop.COMPLETED, made[0].run(), "", effects)

    try:
        if watch is None:
            return work()
        # A session that can be cancelled is handed over whole, from its spec to its end: its
        # spec, prompt and history are built on the thread whose steps use them (handed over
        # at its first step, a K = 10 task cost 0.7 ms more than inline; now 0.2-0.5 ms).
        return handover.run_watched(
            work,
            watch,
            poll=settings.OPENHIVE["CANCEL_POLL_SECONDS"],
            check=lambda: made[0].check_stop(fresh=True),
        )
    except _Stopped as stop:
        waiting = stop.reason == Stop.WAITING
        error = "" if waiting else str(stop)
        return recorder.finish(stop.reason, str(stop), error, effects, stop.details)
    except DomainError as exc:
        return recorder.finish(Stop.ERROR, "", exc.message, effects)
    except RESET_ERRORS:
        # The database is gone past what the reconnects cover: not this session's fault. The
        # caller hands the work back (a task) or tells the user (a chat turn).
        raise
    except Exception as exc:  # a provider or script failure ends this session, not the process
        logger.warning("session %s of %s failed: %s", recorder.session_id, request.team_id, exc)
        # The first line says what went wrong; provider traces stay in the log.
        first_line = (str(exc).strip().splitlines() or [""])[0][:1000]
        return recorder.finish(Stop.ERROR, "", f"{type(exc).__name__}: {first_line}", effects)


class _Loop:
    def __init__(
        self,
        request: SessionRequest,
        agent: AgentSpec,
        recorder: SessionRecorder,
        model: ModelPort,
        effects: dict,
        tool_runner: ToolRunner,
        watch: handover.Watch | None = None,
    ) -> None:
        self.request, self.agent, self.recorder, self.model = request, agent, recorder, model
        self.tool_runner = tool_runner
        # Only a session that can wait is offered the tools that make it wait.
        tools = [s for s in agent.tools if request.pausable or s.name not in PAUSING_TOOLS]
        self.schemas = [spec.function_schema() for spec in tools]
        self.tools_digest = digest(self.schemas)
        self.ctx = ToolContext(
            team=agent.team,
            session_id=recorder.session_id,
            task_id=request.task_id,
            source_channel=request.source_channel,
            topic_id=request.topic_id,
            actor=request.actor or agent.name,
            allowed_tools=[spec.name for spec in tools],
            effects=effects,
            tools={spec.name: spec for spec in tools},
            pausable=request.pausable,
        )
        self.offered = tuple(self.ctx.tools)
        timeout = agent.timeout_seconds
        self.deadline = time.monotonic() + timeout if timeout else None
        self.guard = BudgetGuard(
            agent.budgets,
            BudgetScope(
                team_id=request.team_id,
                team_name=agent.name,
                session_id=recorder.session_id,
                task_id=request.task_id,
                window=request.trigger_window,
            ),
        )
        self.limit = compaction.threshold(agent.profile)
        self.counter = TokenCounter(agent.profile, self.schemas, self.tools_digest)
        self.completions: list[int] = []
        self.cancel_checked_at = float("-inf")
        self.stops_seen = stopping.generation()
        self.spent_tokens = 0
        self.spent_usd = Decimal(0)
        # Given a watch, the session is handed over already (`_run`): its steps run here.
        self.handed_over = watch is not None
        self.watch = watch or handover.Watch()
        # The tool calls' arguments parsed once (`read_arguments`), by id of the call, for
        # the tool runner, which parsed them again.
        self.parsed_arguments: dict[int, dict] = {}

    def run(self) -> str:
        """The steps, on this thread; or, for a session that can time out, on a pooled thread
        watched from this one, so that a model call that does not return is abandoned
        (`handover`; a session that can be cancelled is on such a thread already, `_run`). A
        slow reply must not keep a cancelled session alive."""
        if self.handed_over or (self.request.should_cancel is None and self.deadline is None):
            return self.steps()
        return handover.run_watched(
            self.steps,
            self.watch,
            poll=settings.OPENHIVE["CANCEL_POLL_SECONDS"],
            check=lambda: self.check_stop(fresh=True),
        )

    def steps(self) -> str:
        # Every tool call of the loop runs for this session (lineage) and hands its audit row
        # to the recorder: set once for the loop, not around each call.
        with (
            running(Origin(self.recorder.session_id, self.request.task_id)),
            audit_into(self.recorder.audit),
        ):
            return self._steps()

    def _steps(self) -> str:
        scrubber = get_scrubber()
        messages: list[dict] = [
            {**m, "content": scrubber.data(m["content"])} for m in self.agent.system_messages
        ]
        if self.request.resume is None:
            messages += [*self.request.history, {"role": "user", "content": self.request.content}]
        else:  # a paused session continues: its conversation, then the rest of its calls
            messages += [dict(m) for m in self.request.resume.messages]
            self.run_calls(messages, list(self.request.resume.calls))
        for turn in range(1, self.agent.max_turns + 1):
            # Before every model call the flag is read unless it was read a moment ago; before
            # a tool call, only if the last read is older than the poll.
            self.check_stop(fresh=True)
            self.refresh_offer()
            messages = self.fit(messages)
            reply = self.ask(messages, self.schemas, stream=self.request.stream)
            # Credentials in the model's tool calls are secrets from now on: in the user
            # message that carried them, in this reply, and in everything after.
            self.recorder.handed_over.extend(self.read_arguments(reply.message))
            self.recorder.exchange(
                turn, messages, reply, tools=self.schemas, tools_digest=self.tools_digest
            )
            messages.append(reply.message)
            calls = reply.message.get("tool_calls") or []
            if not calls:
                return reply.message.get("content") or ""
            self.run_calls(messages, calls)
            # the step, its tool calls' audit and the totals: one commit (per write window)
            self.recorder.step_done()
        raise _Stopped(
            Stop.MAX_TURNS,
            f"[Session stopped after {self.agent.max_turns} turns without a final answer; the "
            "work may be partly done: check the tool calls in the audit.]",
        )

    def run_calls(self, messages: list[dict], calls: list[dict]) -> None:
        """Run a reply's tool calls in order. A call that waits for a person stops the
        session here: the pause keeps the conversation so far and the calls still to run."""
        for index, call in enumerate(calls):
            self.check_stop()
            try:
                messages.append(self.call(call))
            except Paused as paused:
                # Kept outside the session's records: no secret may be in it either.
                pause = self.recorder.scrubber().data(pause_state(paused, messages, calls, index))
                raise _Stopped(Stop.WAITING, paused.text, pause=pause) from None

    # --- before the call: the tools offered, the context window and the budgets --------------

    def refresh_offer(self) -> None:
        """A tool may have added tools to the session (a skill bringing in its own): offer
        them from this call on, and allow calling them."""
        offered = tuple(self.ctx.tools)
        if offered == self.offered:
            return
        self.offered = offered
        self.schemas = [spec.function_schema() for spec in self.ctx.tools.values()]
        self.tools_digest = digest(self.schemas)
        self.ctx.allowed_tools = list(offered)
        self.counter.offer(self.schemas, self.tools_digest)

    def fit(self, messages: list[dict]) -> list[dict]:
        if self.limit is None:
            return messages
        done = compaction.compact(
            messages,
            limit=self.limit,
            count=lambda m: self.counter.count(m, tools=self.schemas),
            summarise=self.summarise,
            bound=lambda m: self.counter.bound(m, tools=self.schemas),
        )
        if done is None:
            return messages
        logger.info(
            "compacted the context: %d tool result(s) cut, %d message(s) summarised",
            done.cut,
            done.summarised,
        )
        self.recorder.rebase(done.first_changed)
        return done.messages

    def summarise(self, older: list[dict]) -> str:
        request = compaction.summary_request(older)
        reply = self.ask(request, [], stream=False)
        self.recorder.exchange(0, request, reply, kind=LlmExchange.Kind.COMPACTION)
        return (reply.message.get("content") or "").strip() or "(no summary was written)"

    def check_budget(self, messages: list[dict], tools: list[dict]) -> None:
        def estimate(prompt_tokens: int) -> Estimate:
            made = self.completions
            expected = sum(made) // len(made) if made else 0
            observed = self.spent_usd / self.spent_tokens if self.spent_tokens else Decimal(0)
            return estimate_call(
                model=self.agent.profile.model,
                prompt_tokens=prompt_tokens,
                completion_tokens=expected,
                observed_usd_per_token=observed,
                price=None if self.agent.profile.is_scripted else _price(),
            )

        try:
            # Tokenising the request is the costly part of a check: far from every limit, the
            # request's size in bytes (never fewer than its tokens) settles it.
            self.guard.check(
                lambda: estimate(self.counter.count(messages, tools=tools)),
                bound=lambda: estimate(self.counter.bound(messages, tools=tools)),
                own_tokens=self.spent_tokens,
                own_usd=self.spent_usd,
            )
        except BudgetExceeded as exc:
            raise _Stopped(Stop.BUDGET_EXCEEDED, str(exc), budget=exc.budget) from None

    # --- the call ---------------------------------------------------------------------------

    def ask(self, messages: list[dict], tools: list[dict], *, stream: bool) -> llm.Completion:
        self.check_budget(messages, tools)
        try:
            reply = self.complete(messages, tools, stream=stream)
        except llm.ProviderUnavailable as exc:
            self.recorder.failed(messages, exc.attempts, str(exc))
            raise _Stopped(
                Stop.ERROR,
                f"ProviderUnavailable: {exc}",
                plain=llm.plain_reason(exc, self.agent.profile.name),
                transient=exc.retryable,
                retry_after=exc.retry_after,
            ) from None
        self.completions.append(reply.completion_tokens)
        self.spent_tokens += reply.prompt_tokens + reply.completion_tokens
        self.spent_usd += reply.cost_usd
        return reply

    def complete(self, messages: list[dict], tools: list[dict], *, stream: bool) -> llm.Completion:
        """The model call, made on the loop's thread. A session that can be cancelled or time
        out is watched from its caller's thread while it waits here (see `run`)."""
        on_delta = self.delta if stream and self.request.on_event is not None else None
        with self.watch.model_call():
            return self.model.complete(
                self.agent.profile, messages, tools, agent=self.agent.name, on_delta=on_delta
            )

    def call(self, call: dict) -> dict:
        name = call["function"]["name"]
        arguments = call["function"].get("arguments") or "{}"
        self.emit({"event": "tool_call", "name": name})
        # A tool this session may not call is refused below, not put up for approval.
        gated = (
            approval_gate(self.agent, self.request, name, call) if name in self.ctx.tools else None
        )
        if gated is not None:
            return gated
        # The arguments as the loop parsed them (`read_arguments`), else as the model wrote them.
        parsed = self.parsed_arguments.pop(id(call), None)
        with tracing.tool_span(name, call.get("id") or "") as span:
            result = self.tool_runner(self.ctx, name, arguments if parsed is None else parsed)
            span.set_attribute("openhive.success", bool(result.get("success")))
        if self.ctx.pause is not None:
            pause, self.ctx.pause = self.ctx.pause, None
            raise tool_requested_pause(pause)
        event = {"event": "tool_result", "name": name, "success": result["success"]}
        if not result["success"]:
            # The person watching sees why it failed, as the model does (secrets replaced).
            event["error"] = get_scrubber().text(str(result.get("error", "")))[:1000]
            event["code"] = str(result.get("code", ""))
        self.emit(event)
        return {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": name,
            "content": jsontext.dumps(result),
        }

    def check_stop(self, *, fresh: bool = False) -> None:
        """Read the cancel flag (a database read) if the last read is older than
        CANCEL_POLL_SECONDS, or, when `fresh` (before a model call), older than
        CANCEL_FRESH_SECONDS: a cancelled task pays for no call started after that, and a
        loop of quick steps does not read the flag for each one."""
        if self.request.should_cancel is not None:
            now = time.monotonic()
            age = settings.OPENHIVE["CANCEL_FRESH_SECONDS" if fresh else "CANCEL_POLL_SECONDS"]
            asked = stopping.generation()
            if now - self.cancel_checked_at >= age or (fresh and asked != self.stops_seen):
                self.cancel_checked_at, self.stops_seen = now, asked
                if self.request.should_cancel():
                    raise _Stopped(Stop.CANCELLED, "[Session cancelled.]")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _Stopped(Stop.TIMEOUT, "[Session timed out.]")

    def read_arguments(self, message: dict) -> list[str]:
        """Parse the reply's tool-call arguments once: the secret values they hand over (for
        the recorder's scrubber), and each object kept for its call. Arguments that do not
        parse as an object go to the tool runner as they came, which says what is wrong."""
        self.parsed_arguments.clear()
        values: list[str] = []
        for call in message.get("tool_calls") or []:
            try:
                arguments = json.loads(call.get("function", {}).get("arguments") or "{}")
            except (TypeError, ValueError, RecursionError):
                continue
            if isinstance(arguments, dict):
                self.parsed_arguments[id(call)] = arguments
            values += sensitive_values(arguments)
        return values

    def delta(self, text: str) -> None:
        self.emit({"event": "delta", "content": text})

    def emit(self, event: dict) -> None:
        if self.request.on_event is not None:
            try:
                self.request.on_event(event)
            except Exception:  # a vanished listener must not stop the work
                logger.debug("event listener failed", exc_info=True)


def _price():
    return llm.get_litellm().cost_per_token

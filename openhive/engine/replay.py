"""Replay: run a recorded session again against the current code and rules, with the recorded
model replies, inside a transaction that is rolled back. Tools that reach the outside world
(web, browser, MCP, shell, plugins, queries of other teams) return their recorded results;
every other tool runs for real (and its writes are rolled back). Step by step, the request the
model would now receive (system prompt, messages, tools offered) and the tool results are
compared with the recorded ones; the first divergence is reported with a short diff.

With `profile`, a real model is asked again from the first step instead, and the report says
where its choices (tool calls, final text) differ from the recorded ones."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Any

from django.db import DEFAULT_DB_ALIAS, transaction

from openhive.core.context import ToolContext
from openhive.core.scrubbing import get_scrubber

from . import budgets, llm
from .model import ModelPort
from .models import LlmExchange, Session, ToolCall
from .providers import ProviderProfile
from .replaydiff import message_view, normalise, short_diff, text_of
from .session import run_session
from .spec import AgentSpec, Resume, SessionRequest
from .tool_calls import call_tool

Kind = LlmExchange.Kind
# Tools whose effects leave the process (or run other teams' sessions, replayed on their own
# with --tree): a replay answers them from the record instead of running them.
WORLD_TOOLS = (
    "web_*",
    "browser*",
    "mcp__*",
    "bash",
    "plugin__*",
    "run_skill_script",
    "query_team",
    "query_teams",
    "run_subagent",
)
SpecFor = Callable[[Session], AgentSpec]
Prepare = Callable[[Session], None]


def reaches_world(name: str) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in WORLD_TOOLS)


@dataclass
class Divergence:
    step: int
    what: str
    diff: str = ""

    def describe(self) -> str:
        text = f"step {self.step}: {self.what}"
        return f"{text}\n{self.diff}" if self.diff else text


@dataclass
class ReplayReport:
    session_id: int
    team: str
    steps: int = 0
    recorded_steps: int = 0
    stop_reason: str = ""
    divergence: Divergence | None = None
    error: str = ""
    children: list[ReplayReport] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.divergence is None and not self.error

    def first_problem(self) -> ReplayReport | None:
        if not self.identical:
            return self
        for child in self.children:
            found = child.first_problem()
            if found is not None:
                return found
        return None


class _Diverged(Exception):
    pass


# --- what was recorded -------------------------------------------------------------------------


@dataclass
class RecordedCall:
    kind: str
    request: list[dict]
    tools: list[str]
    tools_digest: str
    exchange: LlmExchange


def recorded_calls(session: Session) -> list[RecordedCall]:
    """Every model call of the session in order, with its whole request rebuilt."""
    calls, previous = [], []
    for exchange in session.exchanges.order_by("turn"):
        if exchange.kind == Kind.COMPACTION:
            request = list(exchange.request_messages)
        else:
            start = len(previous) if exchange.request_start is None else exchange.request_start
            request = previous[:start] + list(exchange.request_messages)
            if exchange.kind == Kind.STEP:
                previous = request
        calls.append(
            RecordedCall(exchange.kind, request, exchange.tools, exchange.tools_digest, exchange)
        )
    return calls


def recorded_request(calls: list[RecordedCall]) -> tuple[str, list[dict]]:
    """The content and history the session started from (its first step's request)."""
    first = next((c for c in calls if c.kind != Kind.COMPACTION), None)
    if first is None:
        return "", []
    body = [m for m in first.request if m.get("role") != "system"]
    if not body:
        return "", []
    return text_of(body[-1].get("content")), body[:-1]


def resumed_request(session: Session, calls: list[RecordedCall]) -> Resume | None:
    """A session that continued a paused one starts from the conversation its first step
    sent (the tool calls it ran before that are in that request already)."""
    resumed_from = (session.spec_options or {}).get("resumed_from")
    first = next((c for c in calls if c.kind != Kind.COMPACTION), None)
    if not resumed_from or first is None:
        return None
    body = tuple(m for m in first.request if m.get("role") != "system")
    return Resume(session_id=int(resumed_from), messages=body)


# --- comparing ---------------------------------------------------------------------------------

def compare_request(
    step: int, call: RecordedCall, messages: list[dict], tools: list[dict]
) -> Divergence | None:
    scrubber = get_scrubber()
    now = [message_view(m) for m in scrubber.data(messages)]
    then = [message_view(m) for m in call.request]
    system_now = [text_of(m.get("content")) for m in now if m.get("role") == "system"]
    system_then = [text_of(m.get("content")) for m in then if m.get("role") == "system"]
    if system_now != system_then:
        return Divergence(
            step,
            "the system prompt differs",
            short_diff("\n".join(system_then), "\n".join(system_now)),
        )
    body_now = [m for m in now if m.get("role") != "system"]
    body_then = [m for m in then if m.get("role") != "system"]
    if body_now != body_then:
        index = next(
            (i for i, (a, b) in enumerate(zip(body_then, body_now, strict=False)) if a != b),
            min(len(body_now), len(body_then)),
        )
        return Divergence(
            step,
            f"the messages differ from message {index + 1} on "
            f"({len(body_then)} recorded, {len(body_now)} now)",
            short_diff(body_then[index:], body_now[index:]),
        )
    if call.kind == Kind.COMPACTION:
        return None
    names = [t["function"]["name"] for t in tools]
    from .recorder import digest

    if call.tools_digest and (names != call.tools or digest(tools) != call.tools_digest):
        what = "the tools offered differ" if names != call.tools else "a tool's schema changed"
        return Divergence(step, what, short_diff(call.tools, names))
    return None


# --- the ports a replay runs with ---------------------------------------------------------------


class RecordedModel:
    """A model port answering each call with the recorded reply, after comparing the request
    with the recorded one."""

    def __init__(self, calls: list[RecordedCall]) -> None:
        self.calls = calls
        self.made = 0
        self.divergence: Divergence | None = None

    def complete(
        self,
        profile: ProviderProfile,
        messages: list[dict],
        tools: list[dict],
        *,
        agent: str,
        timeout: float | None = None,
        on_delta: llm.DeltaSink | None = None,
    ) -> llm.Completion:
        self.made += 1
        if self.made > len(self.calls):
            self.divergence = Divergence(
                self.made,
                f"the replay calls the model more often than the recording "
                f"({len(self.calls)} call(s))",
            )
            raise _Diverged(self.divergence.what)
        call = self.calls[self.made - 1]
        divergence = compare_request(self.made, call, messages, tools)
        if divergence is not None:
            self.divergence = divergence
            raise _Diverged(divergence.what)
        exchange = call.exchange
        if call.kind == Kind.FAILED:
            raise llm.ProviderUnavailable(
                str(exchange.response.get("error", "provider unavailable")),
                list(exchange.attempts),
                kind="recorded",
                retryable=True,
            )
        return llm.Completion(
            message=dict(exchange.response),
            finish_reason=exchange.finish_reason,
            prompt_tokens=exchange.prompt_tokens,
            completion_tokens=exchange.completion_tokens,
            cost_usd=Decimal(exchange.cost_usd),
            latency_ms=0,
            profile=exchange.provider_profile,
        )


class ChoiceModel:
    """`--profile`: a real model answers; its choice at each step is compared with the
    recorded one (which tools with which arguments, or which final text)."""

    def __init__(self, inner: ModelPort, calls: list[RecordedCall]) -> None:
        self.inner = inner
        self.steps = [c for c in calls if c.kind == Kind.STEP]
        self.made = 0
        self.divergence: Divergence | None = None

    def complete(self, profile, messages, tools, *, agent, timeout=None, on_delta=None):
        reply = self.inner.complete(profile, messages, tools, agent=agent, timeout=timeout)
        if not tools:  # a compaction summary: not a choice
            return reply
        self.made += 1
        if self.made > len(self.steps):
            self.divergence = Divergence(self.made, "the model goes on past the recorded end")
            raise _Diverged(self.divergence.what)
        then, now = _choice(self.steps[self.made - 1].exchange.response), _choice(reply.message)
        if then != now:
            self.divergence = Divergence(
                self.made, "the model chooses differently", short_diff(then, now)
            )
            raise _Diverged(self.divergence.what)
        return reply


def _choice(message: dict) -> dict:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = function.get("arguments")
        calls.append({"tool": function.get("name"), "arguments": arguments})
    return {"tool_calls": calls} if calls else {"final_text": message.get("content") or ""}


class RecordedTools:
    """Tool calls in a replay: world-reaching tools return their recorded result; the others
    run, and their result is compared with the recorded one."""

    def __init__(self, rows: list[ToolCall], model: RecordedModel | ChoiceModel) -> None:
        self.rows = rows
        self.model = model
        self.index = 0
        self.divergence: Divergence | None = None

    def __call__(self, ctx: ToolContext, name: str, arguments: str | dict | None) -> dict:
        row = self.rows[self.index] if self.index < len(self.rows) else None
        self.index += 1
        step = self.model.made
        if reaches_world(name):
            if row is not None and row.tool == name:
                return dict(row.result)
            return {
                "success": False,
                "error": f"{name} reaches outside and has no recorded result to replay",
                "code": "NOT_REPLAYABLE",
            }
        result = call_tool(ctx, name, arguments)
        if row is None or row.tool != name:
            return result
        now = normalise(get_scrubber().data(json.loads(json.dumps(result, default=str))))
        then = normalise(row.result)
        if now != then:
            self.divergence = Divergence(
                step, f"the result of tool {name} differs", short_diff(then, now)
            )
            raise _Diverged(self.divergence.what)
        return result


# --- running ------------------------------------------------------------------------------------


def _rolled_back():
    """A transaction that is always rolled back. Marked like a test case's, so code that asks
    for a durable (outermost) transaction runs inside it as a savepoint instead of refusing."""
    atomic = transaction.Atomic(DEFAULT_DB_ALIAS, savepoint=True, durable=False)
    atomic._from_testcase = True
    return atomic


def replay_session(
    session: Session,
    *,
    spec_for: SpecFor,
    model: ModelPort | None = None,
    profile: ProviderProfile | None = None,
    prepare: Prepare | None = None,
) -> ReplayReport:
    """Replay one recorded session. With `profile` (and its `model` port), a real model is
    asked instead of the recording and its choices are compared. `prepare` runs first, inside
    the rolled-back transaction (the caller undoes the session's own effects there, so the
    replay meets the world as the session did)."""
    calls = recorded_calls(session)
    report = ReplayReport(
        session.pk,
        session.team.name,
        recorded_steps=sum(1 for c in calls if c.kind == Kind.STEP),
    )
    rows = list(session.tool_calls.order_by("id"))
    port: RecordedModel | ChoiceModel
    if profile is not None:
        assert model is not None
        port = ChoiceModel(model, calls)
    else:
        port = RecordedModel(calls)
    tools = RecordedTools(rows, port)
    content, history = recorded_request(calls)
    request = SessionRequest(
        team_id=session.team_id,
        content=content,
        kind=session.kind,
        task_id=session.task_id,
        topic_id=session.topic_id,
        history=history,
        spec_options=dict(session.spec_options or {}),
        resume=resumed_request(session, calls),
    )

    def spec() -> AgentSpec:
        built = dataclasses.replace(spec_for(session), budgets=None)
        return built if profile is None else dataclasses.replace(built, profile=profile)

    with _rolled_back(), budgets.suspended():
        try:
            if prepare is not None:
                prepare(session)
            outcome = run_session(request, spec, model=port, tool_runner=tools)
            report.stop_reason = outcome.stop_reason
        finally:
            transaction.set_rollback(True)
    report.steps = port.made
    report.divergence = port.divergence or tools.divergence
    if report.divergence is None and profile is None:
        report.divergence = _compare_end(session, report, outcome.stop_reason, outcome.error)
    return report


def _compare_end(
    session: Session, report: ReplayReport, stop_reason: str, error: str
) -> Divergence | None:
    made = report.steps
    recorded = session.exchanges.count()
    if made < recorded:
        return Divergence(
            made + 1,
            f"the replay stopped after {made} model call(s) ({stop_reason}: {error[:200]}); "
            f"the recording made {recorded}",
        )
    if stop_reason != session.stop_reason:
        return Divergence(
            made, f"the session now ends with {stop_reason}, recorded {session.stop_reason}"
        )
    return None


def replay_tree(session: Session, *, spec_for: SpecFor, **kw: Any) -> ReplayReport:
    """A session and, recursively, the sessions it started (delegated tasks, queries)."""
    report = replay_session(session, spec_for=spec_for, **kw)
    for child in session.child_sessions.select_related("team").order_by("id"):
        report.children.append(replay_tree(child, spec_for=spec_for, **kw))
    return report


def sessions_since(since: datetime) -> list[Session]:
    return list(
        Session.objects.select_related("team")
        .filter(started_at__gte=since)
        .exclude(stop_reason="")
        .order_by("id")
    )

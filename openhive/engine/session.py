"""A session: one disposable run of one team. Build the prompt, offer the allowed tools, loop
completion → tool calls → results until a final answer or a stop, and record everything."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connections
from django.utils import timezone

from openhive.engine import llm
from openhive.engine.models import LlmExchange, Session
from openhive.engine.prompt import build_system_prompt
from openhive.engine.providers import ProviderProfile, resolve_profile
from openhive.errors import DomainError, ProviderNotConfigured
from openhive.tools.audit import call_tool
from openhive.tools.context import ToolContext
from openhive.tools.registry import tools_for
from teams.config import load_team_config
from vault.scrubbing import Scrubber, get_scrubber, sensitive_values

if TYPE_CHECKING:
    from openhive.chat.models import Topic
    from tasks.models import Task
    from teams.models import Team

logger = logging.getLogger(__name__)

EventSink = Callable[[dict], None]
Stop = Session.StopReason


@dataclass
class SessionRequest:
    team: Team
    content: str
    kind: str = Session.Kind.TASK
    task: Task | None = None
    topic: Topic | None = None
    history: list[dict] = field(default_factory=list)
    only_tools: list[str] | None = None
    max_turns: int | None = None
    source_channel: str = ""
    actor: str = ""
    on_event: EventSink | None = None
    should_cancel: Callable[[], bool] | None = None
    timeout_seconds: float | None = None


@dataclass
class SessionOutcome:
    session_id: int
    stop_reason: str
    content: str
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.stop_reason == Stop.COMPLETED


class _Stopped(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def run_session(request: SessionRequest) -> SessionOutcome:
    team = request.team
    session = Session.objects.create(
        team=team, task=request.task, topic=request.topic, kind=request.kind
    )
    scrubber = get_scrubber(refresh=True)
    handed_over: list[str] = []  # secret values seen in tool-call arguments (credentials)
    try:
        config = load_team_config(team.name)
        profile = resolve_profile(config.provider_profile)
        session.model, session.provider_profile = profile.model, profile.name
        max_turns = request.max_turns or config.max_turns
        content = _loop(
            request, session, profile, config.allowed_tools, max_turns, scrubber, handed_over
        )
        return _finish(session, Stop.COMPLETED, content, "", handed_over)
    except _Stopped as stop:
        return _finish(session, stop.reason, str(stop), str(stop), handed_over)
    except (ProviderNotConfigured, DomainError) as exc:
        return _finish(session, Stop.ERROR, "", exc.message, handed_over)
    except Exception as exc:  # a provider or script failure ends this session, not the process
        logger.warning("session %s of team %s failed: %s", session.pk, team.name, exc)
        # The first line says what went wrong; provider traces stay in the log.
        first_line = (str(exc).strip().splitlines() or [""])[0][:1000]
        return _finish(session, Stop.ERROR, "", f"{type(exc).__name__}: {first_line}", handed_over)


def _loop(
    request: SessionRequest,
    session: Session,
    profile: ProviderProfile,
    allowed_tools: list[str],
    max_turns: int,
    scrubber: Scrubber,
    handed_over: list[str],
) -> str:
    team = request.team
    prompt = build_system_prompt(team, topic_name=request.topic.name if request.topic else None)
    messages: list[dict] = [
        {**m, "content": scrubber.data(m["content"])}
        for m in prompt.messages(cache_hint=profile.model.startswith("anthropic/"))
    ]
    messages += [*request.history, {"role": "user", "content": request.content}]
    specs = tools_for(allowed_tools, only=request.only_tools, team=team.name)
    schemas = [spec.function_schema() for spec in specs]
    ctx = ToolContext(
        team=team,
        session_id=session.pk,
        task_id=request.task.pk if request.task else None,
        source_channel=request.source_channel,
        topic_id=request.topic.pk if request.topic else None,
        actor=request.actor or team.name,
        allowed_tools=[spec.name for spec in specs],
    )
    deadline = time.monotonic() + request.timeout_seconds if request.timeout_seconds else None
    recorded_upto = 0
    for turn in range(1, max_turns + 1):
        _check_stop(request, deadline)
        reply = _complete(request, deadline, profile, messages, schemas, team.name)
        # Credentials in the model's tool calls are secrets from now on: in the user message
        # that carried them, in this reply, and in everything after. Secrets that tools stored
        # meanwhile come with a fresh live scrubber.
        handed_over.extend(_secrets_in_calls(reply.message))
        scrubber = get_scrubber().with_extra(handed_over)
        _record_exchange(session, turn, messages, recorded_upto, reply, scrubber)
        recorded_upto = len(messages)
        messages.append(reply.message)
        calls = reply.message.get("tool_calls") or []
        if not calls:
            return reply.message.get("content") or ""
        for call in calls:
            _check_stop(request, deadline)
            name = call["function"]["name"]
            arguments = call["function"].get("arguments") or "{}"
            _emit(request, {"event": "tool_call", "name": name})
            result = call_tool(ctx, name, arguments)
            _emit(request, {"event": "tool_result", "name": name, "success": result["success"]})
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "name": name,
                    "content": json.dumps(result, default=str),
                }
            )
    raise _Stopped(
        Stop.MAX_TURNS,
        f"[Session stopped after {max_turns} turns without a final answer; the work may be "
        "partly done: check the tool calls in the audit.]",
    )


def _secrets_in_calls(message: dict) -> list[str]:
    values: list[str] = []
    for call in message.get("tool_calls") or []:
        try:
            arguments = json.loads(call.get("function", {}).get("arguments") or "{}")
        except (TypeError, ValueError):
            continue
        values += sensitive_values(arguments)
    return values


def _check_stop(request: SessionRequest, deadline: float | None) -> None:
    if request.should_cancel is not None and request.should_cancel():
        raise _Stopped(Stop.CANCELLED, "[Session cancelled.]")
    if deadline is not None and time.monotonic() > deadline:
        raise _Stopped(Stop.TIMEOUT, "[Session timed out.]")


def _complete(
    request: SessionRequest,
    deadline: float | None,
    profile: ProviderProfile,
    messages: list[dict],
    schemas: list[dict],
    team_name: str,
) -> llm.Completion:
    """The model call, abandoned as soon as the session is cancelled or times out: a slow
    reply must not keep a cancelled session alive. An abandoned call finishes in its thread
    and its reply is dropped."""
    if request.should_cancel is None and deadline is None:
        return llm.complete(profile, messages, schemas, team=team_name)
    box: dict = {}
    done = threading.Event()

    def call() -> None:
        try:
            box["reply"] = llm.complete(profile, list(messages), schemas, team=team_name)
        except BaseException as exc:  # handed to the session thread below
            box["error"] = exc
        finally:
            connections.close_all()  # this thread's own connections only
            done.set()

    threading.Thread(target=call, name=f"llm-{team_name}", daemon=True).start()
    poll = settings.OPENHIVE["CANCEL_POLL_SECONDS"]
    while not done.wait(poll):
        _check_stop(request, deadline)
    if "error" in box:
        raise box["error"]
    return box["reply"]


def _emit(request: SessionRequest, event: dict) -> None:
    if request.on_event is not None:
        try:
            request.on_event(event)
        except Exception:  # a vanished listener must not stop the work
            logger.debug("event listener failed", exc_info=True)


def _record_exchange(
    session: Session,
    turn: int,
    messages: list[dict],
    recorded_upto: int,
    reply: llm.Completion,
    scrubber: Scrubber,
) -> None:
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()
    LlmExchange.objects.create(
        session=session,
        turn=turn,
        request_digest=digest,
        # Only what is new since the previous turn: the whole history is the sum of the rows.
        request_messages=scrubber.data(messages[recorded_upto:]),
        response=scrubber.data(reply.message),
        finish_reason=reply.finish_reason,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        cost_usd=reply.cost_usd,
        latency_ms=reply.latency_ms,
    )
    session.turns = turn
    session.prompt_tokens += reply.prompt_tokens
    session.completion_tokens += reply.completion_tokens
    session.cost_usd += reply.cost_usd
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


def _finish(
    session: Session, reason: str, content: str, error: str, handed_over: list[str]
) -> SessionOutcome:
    # The session may have created secrets: reload, and add those only seen in tool calls.
    scrubber = get_scrubber(refresh=True).with_extra(handed_over)
    session.stop_reason = reason
    session.final_text = scrubber.text(content)
    session.error = scrubber.text(error)
    session.finished_at = timezone.now()
    session.save()
    return SessionOutcome(session.pk, reason, session.final_text, session.error)


def outcome_text(outcome: SessionOutcome) -> str:
    """What a person should read about a session's end."""
    if outcome.ok:
        return outcome.content
    return outcome.content or f"Error: {outcome.error}"

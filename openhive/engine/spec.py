"""What a session runs: an agent spec, built by the caller (for a team: `teams.agent`), and a
request that names the work by ids. The engine never loads a team, a task or a topic itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from openhive.core.context import TeamRef
from openhive.core.reads import Read
from openhive.core.registry import ToolSpec

from .budgets import Budgets, TriggerWindow
from .models import Session
from .providers import ProviderProfile

EventSink = Callable[[dict], None]


@dataclass(frozen=True)
class AgentSpec:
    """An agent: its system prompt, the tools it is offered, its model profile and its limits.
    `team` is who acts (the tools' context); `name` is what the model port is told (the
    scripted provider's `when: {team: ...}`)."""

    team: TeamRef
    name: str
    system_messages: tuple[dict, ...]
    tools: tuple[ToolSpec, ...]
    profile: ProviderProfile
    max_turns: int
    timeout_seconds: float | None = None
    # The team's budgets (task, daily, trigger window); the org-wide cap is read by the engine.
    budgets: Budgets | None = None
    # Tool globs whose calls wait for an operator's approval (the team's `require_approval`).
    require_approval: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resume:
    """Where a paused session stopped, to continue it in a new session: the conversation up
    to the pause (no system messages: the new session builds its own prompt), then `calls`
    of the paused reply still to run, in order, before the next model call. `approved` are
    call ids an operator approved: they run without asking again."""

    session_id: int
    messages: tuple[dict, ...]
    calls: tuple[dict, ...] = ()
    approved: frozenset[str] = frozenset()


class Preload(Protocol):
    """What the caller's spec will need from the database at the session's start, read with
    the session's own row in one round trip where the database allows (`core.reads`)."""

    def reads(self) -> list[Read]: ...

    def take(self, answers: list[Any]) -> None:
        """The answers of `reads()`, in order, before the spec is built."""


@dataclass
class SessionRequest:
    """One piece of work for an agent, by ids: the engine records them on the session."""

    team_id: int
    content: str
    kind: str = Session.Kind.TASK
    task_id: int | None = None
    topic_id: int | None = None
    history: list[dict] = field(default_factory=list)
    source_channel: str = ""
    actor: str = ""
    on_event: EventSink | None = None
    should_cancel: Callable[[], bool] | None = None
    # Stream the reply's text to `on_event` as `delta` events, where the provider streams.
    stream: bool = False
    # Where the work came from (`lineage.current_origin()` of the session that queued it).
    parent_session_id: int | None = None
    parent_task_id: int | None = None
    trace: dict[str, str] = field(default_factory=dict)
    # The trigger window the task belongs to (window budgets).
    trigger_window: TriggerWindow | None = None
    # How the caller shaped the spec (only_tools, topic_name, max_turns), kept for replay.
    spec_options: dict[str, Any] = field(default_factory=dict)
    # Continue a paused session instead of starting from `content` and `history`.
    resume: Resume | None = None
    preload: Preload | None = None
    # The caller's own end of this work, written in the transaction of the session's end
    # (a task's end: one commit, and one round trip, where there were two).
    closing: Closing | None = None

    @property
    def pausable(self) -> bool:
        """Only a task's own session can wait for a person: its state is the task's."""
        return self.kind == Session.Kind.TASK and self.task_id is not None


@dataclass(frozen=True)
class ClosingWrite:
    """One statement a caller has committed with the session's end. `durable`: the commit
    waits for the database's WAL flush (the session's own end alone need not)."""

    sql: str
    params: list[Any]
    durable: bool = True


# Asked once the session's outcome is known, before its end is written: the statement to
# write with it, or None (the caller records its end apart).
Closing = Callable[["SessionOutcome"], ClosingWrite | None]


@dataclass
class SessionOutcome:
    session_id: int
    stop_reason: str
    content: str
    error: str = ""
    # Side effects the tools reported for the caller (e.g. `topic_id` of a topic it opened).
    effects: dict[str, Any] = field(default_factory=dict)
    # The model provider (and its fallbacks) stayed down: the work may succeed later, after
    # `retry_after` seconds if the provider said so.
    transient: bool = False
    retry_after: float | None = None
    # Which budget stopped the session (`daily_tokens`, ...), for `budget_exceeded`.
    budget: str = ""
    # The error as a sentence for a person chatting (no exception names or developer advice);
    # `error` keeps the operator's detail.
    plain_error: str = ""
    # The session stopped to wait for a person (stop reason `waiting`): what it waits for
    # (`kind`, the question or the call) and where to resume (`messages`, `call`, `calls`).
    pause: dict[str, Any] | None = None
    # Rows the request's `closing` statement changed, written with the session's end; None
    # when none was written with it (the caller writes its end itself).
    closed: int | None = None

    @property
    def ok(self) -> bool:
        return self.stop_reason == Session.StopReason.COMPLETED


def outcome_text(outcome: SessionOutcome) -> str:
    """What a person should read about a session's end."""
    if outcome.ok:
        return outcome.content
    return outcome.content or f"Error: {outcome.error}"

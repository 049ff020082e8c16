"""A team as an agent: the spec its sessions run (its rule cascade, the tools its allowlist
admits, its provider profile and limits), and the one way to run a session of a team, as its
orchestrator or as one of its subagents (`teams.subagents`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from openhive.core.prompt_sections import registered_sections
from openhive.core.reads import Read
from openhive.core.registry import ToolSpec, team_tools
from openhive.engine.budgets import TriggerWindow
from openhive.engine.models import Session
from openhive.engine.providers import resolve_profile
from openhive.engine.session import run_session
from openhive.engine.spec import (
    AgentSpec,
    Closing,
    EventSink,
    Resume,
    SessionOutcome,
    SessionRequest,
)

from .config import read_team_config
from .models import MAIN_TEAM, Team
from .prompt import ACTIVE_SUBAGENT, INBOX, SUBAGENTS, TOOL_NAMES, build_system_prompt
from .selectors import team_ancestors_read
from .services import teammessages_take, teammessages_take_unread, teammessages_unread_read
from .skills import load_skill
from .subagents import (
    MAX_DEPTH,
    RUN_SUBAGENT,
    Subagent,
    load_subagent,
    load_subagents,
    unmatched_tools,
)

logger = logging.getLogger(__name__)

# The name a session start's read of the team's ancestors is kept under (`SessionStart`).
ANCESTORS = "ancestors"


def agent_spec_for(
    team: Team,
    *,
    only_tools: Iterable[str] | None = None,
    topic_name: str | None = None,
    max_turns: int | None = None,
    timeout_seconds: float | None = None,
    inbox: list | None = None,
    subagent: str | None = None,
    depth: int = 0,
    skills: Iterable[str] = (),
    start: SessionStart | None = None,
) -> AgentSpec:
    """The spec of one session of `team`. Building it starts the session: unread messages from
    other teams are taken from the inbox here (once), and shown in this prompt (a replay passes
    the messages the recorded session was shown instead).

    With `subagent`, the session runs as that subagent at nesting `depth` (1 for the one an
    orchestrator or a trigger starts): its identity replaces the orchestrator's role, its tools
    are the team's allowlist narrowed by the subagent's `tools`, its profile its own if it
    names one. The inbox stays with the orchestrator. `start`: what the session's start read
    with its row (else it is read here)."""
    loaded = start.loaded if start is not None else {}
    config = read_team_config(team.name)  # shared: only read here
    active = load_subagent(team.name, subagent) if subagent else None
    profile = resolve_profile(
        active.provider_profile if active and active.provider_profile else config.provider_profile
    )
    if active is not None:
        inbox = []
    elif inbox is None and INBOX in loaded:
        inbox = teammessages_take(loaded[INBOX])
    elif inbox is None:
        inbox = teammessages_take_unread(team=team) if team.pk is not None else []
    tools = team_tools(team, config.allowed_tools, only=only_tools)
    if active is not None:
        tools = _narrowed(team, active, tools)
    # Skills given with the work (a trigger's `skill`) bring their required tools from the start,
    # as activating them would.
    required = [t for name in skills for t in load_skill(team.name, name).required_tools]
    if required:
        offered = {spec.name for spec in tools}
        extra = team_tools(team, config.allowed_tools, only=required)
        tools = sorted([*tools, *(s for s in extra if s.name not in offered)], key=lambda s: s.name)
    available: list[Subagent] = []
    if any(spec.name == RUN_SUBAGENT for spec in tools):
        available = _runnable_subagents(team, depth, active)
        if not available:
            tools = [spec for spec in tools if spec.name != RUN_SUBAGENT]
    prompt = build_system_prompt(
        team,
        topic_name=topic_name,
        data={
            **loaded,
            INBOX: inbox,
            TOOL_NAMES: [spec.name for spec in tools],
            SUBAGENTS: available,
            ACTIVE_SUBAGENT: active,
        },
        subagent=active,
        ancestors_chain=loaded.get(ANCESTORS),
    )
    return AgentSpec(
        team=team,
        # The scripted provider's `when: {team: ...}` and the tools' actor see `ops/writer`.
        name=f"{team.name}/{active.name}" if active else team.name,
        system_messages=tuple(prompt.messages(cache_hint=profile.model.startswith("anthropic/"))),
        tools=tuple(tools),
        profile=profile,
        max_turns=max_turns or config.max_turns,
        timeout_seconds=timeout_seconds,
        budgets=config.budgets if config.budgets.any() else None,
        require_approval=tuple(config.require_approval),
    )


class SessionStart:
    """What a team's session start reads (its ancestors, its inbox, the prompt sections'
    data), handed to the engine to send with the session's row (`engine.spec.Preload`).
    Each answer lands in `loaded`, under the name the prompt reads it by."""

    def __init__(self, team: Team, *, inbox: bool) -> None:
        self.team, self.inbox = team, inbox
        self.loaded: dict[str, Any] = {}
        self._names: list[str] = []

    def reads(self) -> list[Read]:
        team, named = self.team, []
        if team.parent_id is None:
            self.loaded[ANCESTORS] = []
        else:
            named.append((ANCESTORS, team_ancestors_read(team)))
        if self.inbox and team.pk is not None:
            named.append((INBOX, teammessages_unread_read(team=team)))
        named += [(s.name, s.load(team)) for s in registered_sections() if s.load is not None]
        self._names = [name for name, _read in named]
        return [read for _name, read in named]

    def take(self, answers: list[Any]) -> None:
        self.loaded.update(zip(self._names, answers, strict=True))


def _narrowed(team: Team, active: Subagent, tools: list[ToolSpec]) -> list[ToolSpec]:
    """The team's allowlist ∩ the subagent's `tools`: an entry naming a tool the team may not
    use is not offered, and the log says so."""
    if active.tools is None:
        return tools
    missing = unmatched_tools(active, [spec.name for spec in tools])
    if missing:
        logger.warning(
            "team %s: subagent %s lists tools the team's allowlist does not offer (not "
            "offered): %s",
            team.name,
            active.name,
            ", ".join(missing),
        )
    return [spec for spec in tools if active.admits(spec.name)]


def _runnable_subagents(team: Team, depth: int, active: Subagent | None) -> list[Subagent]:
    """Whom this session may start: nobody for the main agent or at the depth cap; never
    the subagent itself (a loop that only burns turns)."""
    if team.name == MAIN_TEAM or depth >= MAX_DEPTH:
        return []
    found, _problems = load_subagents(team.name)
    return [s for s in found if active is None or s.name != active.name]


def run_team_session(
    team: Team,
    content: str,
    *,
    kind: str = "task",
    task_id: int | None = None,
    topic_id: int | None = None,
    topic_name: str | None = None,
    history: list[dict] | None = None,
    only_tools: Iterable[str] | None = None,
    max_turns: int | None = None,
    timeout_seconds: float | None = None,
    source_channel: str = "",
    actor: str = "",
    on_event: EventSink | None = None,
    should_cancel: Callable[[], bool] | None = None,
    stream: bool = False,
    origin: dict | None = None,
    trigger_window: TriggerWindow | None = None,
    subagent: str | None = None,
    depth: int = 1,
    skills: Iterable[str] = (),
    resume: Resume | None = None,
    closing: Closing | None = None,
) -> SessionOutcome:
    """With `resume`, the session continues a paused one (see `openhive.engine.pausing`).
    `origin` is what the queue kept of the session that asked for this work
    (`parent_session_id`, `parent_task_id`, `trace`). With `subagent` the session runs as
    that subagent (kind `subagent`) at nesting `depth`."""
    origin = origin or {}
    only_tools = list(only_tools) if only_tools is not None else None
    skills = list(skills)
    spec_options = {
        k: v
        for k, v in {
            "only_tools": sorted(only_tools) if only_tools is not None else None,
            "topic_name": topic_name,
            "max_turns": max_turns,
            "subagent": subagent or None,
            "depth": depth if subagent else None,
            "skills": skills or None,
            # The paused session this one continues: the task's story links the two.
            "resumed_from": resume.session_id if resume is not None else None,
        }.items()
        if v is not None
    }
    request = SessionRequest(
        team_id=team.pk,
        content=content,
        kind=Session.Kind.SUBAGENT if subagent else kind,
        task_id=task_id,
        topic_id=topic_id,
        history=list(history or []),
        source_channel=source_channel,
        actor=actor,
        on_event=on_event,
        should_cancel=should_cancel,
        stream=stream,
        parent_session_id=origin.get("parent_session_id"),
        parent_task_id=origin.get("parent_task_id"),
        trace=dict(origin.get("trace") or {}),
        trigger_window=trigger_window,
        spec_options=spec_options,
        resume=resume,
        closing=closing,
    )
    start = SessionStart(team, inbox=not subagent)
    request.preload = start
    return run_session(
        request,
        lambda: agent_spec_for(
            team,
            only_tools=only_tools,
            topic_name=topic_name,
            max_turns=max_turns,
            timeout_seconds=timeout_seconds,
            subagent=subagent,
            depth=depth if subagent else 0,
            skills=skills,
            start=start,
        ),
    )

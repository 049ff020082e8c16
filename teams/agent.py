"""A team as an agent: the spec its sessions run (its rule cascade, the tools its allowlist
admits, its provider profile and limits), and the one way to run a session of a team."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from openhive.core.registry import team_tools
from openhive.engine.budgets import TriggerWindow
from openhive.engine.providers import resolve_profile
from openhive.engine.session import run_session
from openhive.engine.spec import AgentSpec, EventSink, SessionOutcome, SessionRequest

from .config import load_team_config
from .models import Team
from .prompt import INBOX, TOOL_NAMES, build_system_prompt
from .services import teammessages_take_unread
from .skills import load_skill


def agent_spec_for(
    team: Team,
    *,
    only_tools: Iterable[str] | None = None,
    topic_name: str | None = None,
    max_turns: int | None = None,
    timeout_seconds: float | None = None,
    inbox: list | None = None,
    skills: Iterable[str] = (),
) -> AgentSpec:
    """The spec of one session of `team`. Building it starts the session: unread messages from
    other teams are taken from the inbox here (once), and shown in this prompt (a replay passes
    the messages the recorded session was shown instead)."""
    config = load_team_config(team.name)
    profile = resolve_profile(config.provider_profile)
    if inbox is None:
        inbox = teammessages_take_unread(team=team) if team.pk is not None else []
    tools = team_tools(team, config.allowed_tools, only=only_tools)
    # Skills given with the work (a trigger's `skill`) bring their required tools from the start,
    # as activating them would.
    required = [t for name in skills for t in load_skill(team.name, name).required_tools]
    if required:
        offered = {spec.name for spec in tools}
        extra = team_tools(team, config.allowed_tools, only=required)
        tools = sorted([*tools, *(s for s in extra if s.name not in offered)], key=lambda s: s.name)
    prompt = build_system_prompt(
        team,
        topic_name=topic_name,
        data={INBOX: inbox, TOOL_NAMES: [spec.name for spec in tools]},
    )
    return AgentSpec(
        team=team,
        name=team.name,
        system_messages=tuple(prompt.messages(cache_hint=profile.model.startswith("anthropic/"))),
        tools=tuple(tools),
        profile=profile,
        max_turns=max_turns or config.max_turns,
        timeout_seconds=timeout_seconds,
        budgets=config.budgets if config.budgets.any() else None,
    )


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
    skills: Iterable[str] = (),
) -> SessionOutcome:
    """`origin` is what the queue kept of the session that asked for this work
    (`parent_session_id`, `parent_task_id`, `trace`)."""
    origin = origin or {}
    only_tools = list(only_tools) if only_tools is not None else None
    skills = list(skills)
    spec_options = {
        k: v
        for k, v in {
            "only_tools": sorted(only_tools) if only_tools is not None else None,
            "topic_name": topic_name,
            "max_turns": max_turns,
            "skills": skills or None,
        }.items()
        if v is not None
    }
    request = SessionRequest(
        team_id=team.pk,
        content=content,
        kind=kind,
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
    )
    return run_session(
        request,
        lambda: agent_spec_for(
            team,
            only_tools=only_tools,
            topic_name=topic_name,
            max_turns=max_turns,
            timeout_seconds=timeout_seconds,
            skills=skills,
        ),
    )

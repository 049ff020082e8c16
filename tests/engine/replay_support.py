"""Shared by the replay tests: run a recorded session's replay the way the command does."""

from __future__ import annotations

from openhive.cli.replay import replay_options
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.engine.replay import ReplayReport, replay_session, replay_tree
from tasks.models import Task
from teams.models import Team, TeamMessage


def replay(session_id: int, *, tree: bool = False) -> ReplayReport:
    session = Session.objects.select_related("team").get(pk=session_id)
    run = replay_tree if tree else replay_session
    return run(session, **replay_options())


def database_state() -> dict:
    """Row counts and the newest ids of everything a session can write."""
    state = {}
    for model in (Session, LlmExchange, ToolCall, Task, Team, TeamMessage):
        state[model.__name__] = (
            model.objects.count(),
            model.objects.order_by("-pk").values_list("pk", flat=True).first(),
        )
    return state

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from django.test import Client

from openhive.core import paths
from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from tasks.models import Task
from teams.config import default_config, write_team_config
from teams.models import ScopeKeyword, Team
from teams.services import team_workspace_scaffold
from tests.api.factories import UserFactory
from tests.factories import TeamFactory
from triggers.models import TriggerConfig
from triggers.services import trigger_create, trigger_enable, trigger_fire
from trust.services import api_token_create

SCOUT = "---\ndescription: Researches the team's field\n---\nYou research the field.\n"
START = datetime(2026, 11, 20, 2, 0, tzinfo=UTC)


@pytest.fixture
def ops(main_team) -> Team:
    """A bootstrapped team with a subagent, scope keywords and every tool allowed: ready."""
    team = TeamFactory(name="ops", parent=main_team, bootstrapped=True)
    team_workspace_scaffold(paths.team_dir("ops"))
    write_team_config(
        default_config("ops", parent="main").model_copy(update={"allowed_tools": ["*"]})
    )
    (paths.team_dir("ops") / "subagents" / "scout.md").write_text(SCOUT)
    for keyword in ("backups", "disks", "postgres", "tls"):
        ScopeKeyword.objects.create(team=team, keyword=keyword)
    return team


def allow_tools(team: Team, tools: list[str]) -> None:
    write_team_config(
        default_config(team.name, parent="main").model_copy(update={"allowed_tools": tools})
    )


@pytest.fixture
def cycle_trigger(ops) -> Callable[[str], TriggerConfig]:
    def make(kind: str = "learning") -> TriggerConfig:
        trigger = trigger_create(
            team=ops,
            name=f"{kind}-cycle-scout",
            type=TriggerConfig.Type.SCHEDULE,
            config={"cron": "7 2 * * *"},
            task=f"Run a {kind} cycle.",
            subagent="scout",
            overlap_policy=TriggerConfig.OverlapPolicy.ALLOW,
        )
        return trigger_enable(trigger=trigger)

    return make


def fire(trigger: TriggerConfig, key: str = "slot-1", now: datetime = START):
    return trigger_fire(trigger_id=trigger.pk, event_key=key, now=now)


def fired_task(trigger: TriggerConfig, key: str = "slot-1", now: datetime = START) -> Task:
    result = fire(trigger, key, now)
    assert result.outcome == "fired", result
    return Task.objects.get(pk=result.task_id)


def call(team: Team, tool: str, task: Task | None = None, **arguments) -> dict:
    ctx = ToolContext(team=team, actor=f"{team.name}/scout", task_id=task.pk if task else None)
    return call_tool(ctx, tool, arguments)


@pytest.fixture
def api_client(db, settings) -> Client:
    """An operator's API client (staff token)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    UserFactory(username="operator", is_staff=True)
    _, token = api_token_create(username="operator", name="tests")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")

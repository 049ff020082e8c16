from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import yaml

from openhive.core import paths
from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from teams.config import default_config, write_team_config
from teams.models import Team
from teams.services import team_workspace_scaffold

from .loopback import LoopbackServer


def make_team(name: str, parent: Team | None, **config: object) -> Team:
    team = Team.objects.create(name=name, parent=parent, description=f"{name} team")
    team_workspace_scaffold(paths.team_dir(name))
    base = default_config(name, parent=parent.name if parent else None)
    write_team_config(base.model_copy(update=config) if config else base)
    return team


def set_config(name: str, **values: object) -> None:
    path = paths.team_dir(name) / "config.yaml"
    data = yaml.safe_load(path.read_text())
    data.update(values)
    path.write_text(yaml.safe_dump(data))


@pytest.fixture
def ops(main_team) -> Team:
    return make_team("ops", main_team)


@pytest.fixture
def call(ops) -> Callable[..., dict]:
    """Call a tool as the ops team would in a session: through call_tool (audit included)."""

    def invoke(tool: str, team: Team | None = None, **arguments: object) -> dict:
        ctx = ToolContext(team=team or ops, actor=(team or ops).name, allowed_tools=["*"])
        return call_tool(ctx, tool, arguments)

    return invoke


@pytest.fixture
def workspace(ops):
    return paths.team_dir("ops")


@pytest.fixture
def loopback(settings) -> Iterator[LoopbackServer]:
    """A loopback server the operator exempted (OPENHIVE_SSRF_ALLOW), as tests must."""
    server = LoopbackServer()
    settings.OPENHIVE = {**settings.OPENHIVE, "SSRF_ALLOW": [server.authority]}
    yield server
    server.close()


@pytest.fixture
def other_loopback() -> Iterator[LoopbackServer]:
    """A second loopback server that is NOT exempted: the guard must keep requests away."""
    server = LoopbackServer()
    yield server
    server.close()

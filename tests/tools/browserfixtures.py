"""Fixtures of the browser test modules: each module gets its own browser manager (one Chromium
for the module), a pages server exempted with OPENHIVE_SSRF_ALLOW and a forbidden server that is
not. A test module imports the fixtures it uses by name."""

from __future__ import annotations

import os

import pytest

from openhive.core.context import ToolContext
from openhive.core.registry import team_tools
from openhive.engine.tool_calls import call_tool
from openhive.tools import browsermanager
from openhive.tools.browsermanager import BrowserManager

from .browserpages import ForbiddenServer, PagesServer
from .conftest import make_team, set_config

SECRET = "pw-Zq81mXv3Lr0T"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def manager(clock):
    manager = BrowserManager(max_contexts=2, idle_seconds=300, clock=clock)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(browsermanager._managers, os.getpid(), manager)
        yield manager
    manager.shutdown()


@pytest.fixture(scope="module")
def forbidden():
    server = ForbiddenServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def site(forbidden):
    server = PagesServer(forbidden=forbidden.base, password=SECRET)
    yield server
    server.close()


@pytest.fixture(autouse=True)
def exempt_site(settings, site, manager):
    settings.OPENHIVE = {**settings.OPENHIVE, "SSRF_ALLOW": [site.authority]}
    yield
    for team in manager.live_teams():
        manager.close_team(team)


@pytest.fixture
def ops(main_team):
    team = make_team("ops", main_team)
    set_config("ops", browser={"timeout_ms": 10_000})
    return team


@pytest.fixture
def call(ops):
    def invoke(tool: str, team=None, **arguments: object) -> dict:
        team = team or ops
        ctx = ToolContext(
            team=team,
            actor=team.name,
            allowed_tools=["*"],
            tools={spec.name: spec for spec in team_tools(team, ["*"])},
        )
        return call_tool(ctx, tool, arguments)

    return invoke


def ref_of(snapshot: str, text: str) -> str:
    """The ref of the first snapshot line that mentions `text`."""
    for line in snapshot.splitlines():
        if text in line and "[ref=" in line:
            return line.split("[ref=", 1)[1].split("]", 1)[0]
    raise AssertionError(f"no element with {text!r} in:\n{snapshot}")

"""Shared pieces of the MCP client tests: a session-like tool context, the fixture server."""

from __future__ import annotations

import sys
from pathlib import Path

from openhive.core.context import ToolContext
from openhive.core.registry import team_tools
from openhive.engine.tool_calls import call_tool
from teams.config import load_team_config
from teams.models import Team

FIXTURE_SERVER = str(Path(__file__).with_name("mcp_fixture_server.py"))
FIXTURE = {"command": sys.executable, "args": [FIXTURE_SERVER]}


def offered(team: Team) -> dict:
    """The tools a session of `team` is offered, by name (as `agent_spec_for` builds them)."""
    config = load_team_config(team.name)
    return {spec.name: spec for spec in team_tools(team, config.allowed_tools)}


def call_as(team: Team, tool: str, **arguments: object) -> dict:
    """Call a tool the way a session of `team` does: through the tool door, audit included."""
    config = load_team_config(team.name)
    ctx = ToolContext(
        team=team, actor=team.name, allowed_tools=config.allowed_tools, tools=offered(team)
    )
    return call_tool(ctx, tool, arguments)

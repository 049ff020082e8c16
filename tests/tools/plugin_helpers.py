"""Shared pieces of the plugin tests: sample plugins and a caller that sees the team's
plugins the way a session does (the registry's run-time source, the allowlist)."""

from __future__ import annotations

import shutil
import textwrap

import pytest

from openhive.core.context import ToolContext
from openhive.core.registry import team_tools
from openhive.engine.tool_calls import call_tool
from teams.models import Team

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)"
)

ADD = textwrap.dedent(
    '''
    """Adds two numbers."""
    import math

    DESCRIPTION = "Add two numbers"
    PARAMETERS = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }


    def run(args):
        print("thinking out loud")  # goes to stderr, never into the result
        return {"sum": args["a"] + args["b"], "pi": round(math.pi, 2)}
    '''
).lstrip()


def plugin(body: str, *, parameters: str = '{"type": "object", "properties": {}}') -> str:
    """A plugin whose run() body is `body` (indented for you)."""
    return (
        f'DESCRIPTION = "test plugin"\nPARAMETERS = {parameters}\n\n\ndef run(args):\n'
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\n"
    )


def call_as(team: Team, name: str, patterns: list[str] | None = None, **arguments) -> dict:
    patterns = patterns or ["*"]
    offered = {spec.name: spec for spec in team_tools(team, patterns)}
    ctx = ToolContext(team=team, actor=team.name, allowed_tools=patterns, tools=offered)
    return call_tool(ctx, name, arguments)


def register(team: Team, name: str, source: str) -> dict:
    return call_as(team, "register_plugin_tool", tool_name=name, source_code=source)

"""Tools that exist only at run time (a team's plugins, its MCP servers' tools): offered to the
teams their source names, filtered by the allowlist, callable like declared tools, and able to
widen a running session's offer (a skill bringing in its tools)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict

from openhive.core import registry
from openhive.core.context import ToolContext
from openhive.core.registry import ToolSpec, register_tool_source, team_tools, tool
from openhive.engine.models import ToolCall
from openhive.engine.tool_calls import call_tool
from openhive.org.services import team_spawn
from teams.agent import run_team_session
from teams.config import load_team_config, write_team_config

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "object",
    "properties": {"word": {"type": "string"}},
    "required": ["word"],
    "additionalProperties": False,
}


def echo(ctx: ToolContext, args: dict) -> dict:
    return {"echo": f"{ctx.team.name}:{args['word']}"}


def runtime(name: str) -> ToolSpec:
    return ToolSpec(name, "Echo a word", None, "daily", echo, parameters=SCHEMA)


@pytest.fixture
def sources(monkeypatch):
    monkeypatch.setattr(registry, "_SOURCES", {})
    monkeypatch.setattr(registry, "_PREFIXES", {})
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


@pytest.fixture
def ops(main_team):
    return team_spawn(parent=main_team, name="ops", scope_accepts=["ops"]).team


def allow(name: str, patterns: list[str]) -> None:
    config = load_team_config(name)
    write_team_config(config.model_copy(update={"allowed_tools": patterns}))


def test_a_source_offers_its_tools_only_to_its_team_and_within_the_allowlist(
    sources, main_team, ops
):
    register_tool_source("test", lambda team: [runtime(f"plugin__{team.name}_echo")])
    assert "plugin__ops_echo" in {s.name for s in team_tools(ops, ["*"])}
    assert "plugin__ops_echo" not in {s.name for s in team_tools(main_team, ["*"])}
    assert "plugin__ops_echo" not in {s.name for s in team_tools(ops, ["list_*"])}
    assert [s.name for s in team_tools(ops, ["*"], only=["plugin__ops_echo"])] == [
        "plugin__ops_echo"
    ]


def test_a_runtime_tool_never_shadows_a_declared_one(sources, ops):
    register_tool_source("test", lambda team: [runtime("list_teams")])
    (spec,) = [s for s in team_tools(ops, ["list_teams"])]
    assert spec.args is not None  # the declared list_teams, not the run-time impostor


def test_a_session_offers_and_calls_a_runtime_tool(sources, ops, scripted_provider):
    register_tool_source("test", lambda team: [runtime("plugin__echo")])
    allow("ops", ["plugin__*"])
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {"tool_calls": [{"name": "plugin__echo", "arguments": {"word": "hi"}}]},
            },
            {"when": {"last": "tool"}, "reply": {"content": "done"}},
        ]
    )
    outcome = run_team_session(ops, "go")
    assert outcome.ok and outcome.content == "done"
    call = ToolCall.objects.get(session_id=outcome.session_id)
    assert call.tool == "plugin__echo" and call.success and call.result["echo"] == "ops:hi"


def test_a_tool_can_widen_the_offer_for_the_rest_of_the_session(
    sources, ops, scripted_provider, monkeypatch
):
    class NoArgs(BaseModel):
        model_config = ConfigDict(extra="forbid")

    @tool(name="zz_unlock", description="Bring in plugin__echo", args=NoArgs)
    def unlock(ctx: ToolContext, args: NoArgs) -> dict:
        ctx.tools["plugin__echo"] = runtime("plugin__echo")
        return {"unlocked": True}

    allow("ops", ["zz_unlock"])
    offered: list[list[str]] = []
    from openhive.engine import llm

    real = llm.complete

    def spy(profile, messages, tools, **kwargs):
        offered.append(sorted(t["function"]["name"] for t in tools))
        return real(profile, messages, tools, **kwargs)

    monkeypatch.setattr(llm, "complete", spy)
    scripted_provider(
        [
            {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "zz_unlock"}]}},
            {
                "when": {"last": "tool", "tool": "zz_unlock"},
                "reply": {"tool_calls": [{"name": "plugin__echo", "arguments": {"word": "x"}}]},
            },
            {"when": {"last": "tool"}, "reply": {"content": "ok"}},
        ]
    )
    outcome = run_team_session(ops, "go")
    assert outcome.ok
    assert offered[0] == ["zz_unlock"] and offered[1] == ["plugin__echo", "zz_unlock"]
    results = ToolCall.objects.filter(session_id=outcome.session_id).order_by("id")
    assert [(c.tool, c.success) for c in results] == [("zz_unlock", True), ("plugin__echo", True)]


def test_call_tool_refuses_a_runtime_tool_the_session_does_not_offer(sources, ops):
    ctx = ToolContext(team=ops, allowed_tools=["list_teams"])
    result = call_tool(ctx, "plugin__echo", json.dumps({"word": "x"}))
    assert result["success"] is False and result["code"] == "UNKNOWN_TOOL"


def test_a_source_with_a_prefix_is_not_asked_when_the_allowlist_cannot_match_it(sources, ops):
    asked: list[str] = []

    def source(team) -> list[ToolSpec]:
        asked.append(team.name)
        return [runtime("ext__echo")]

    register_tool_source("ext", source, prefix="ext__")
    assert [s.name for s in team_tools(ops, ["list_teams", "mcp__*"])] == ["list_teams"]
    assert asked == []
    assert [s.name for s in team_tools(ops, ["ext__*"])] == ["ext__echo"]
    assert "ext__echo" in {s.name for s in team_tools(ops, ["*"])}
    assert asked == ["ops", "ops"]


@pytest.mark.parametrize(
    "patterns, expected",
    [
        (["*"], True),
        (["ext__*"], True),
        (["e*"], True),
        (["?xt__echo"], True),
        (["ext__echo"], True),
        (["list_teams", "mcp__*"], False),
        (["ex"], False),
        (["exz*"], False),
    ],
)
def test_which_allowlists_may_match_a_prefix(patterns, expected):
    assert registry.may_match_prefix(patterns, "ext__") is expected

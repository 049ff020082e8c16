"""The reach tools in a real team session (scripted provider): "fetch the status page and write
a report" does both, every call is audited, the prompt says which tools and which workspace the
team has, and the main agent's chat turn is not offered them."""

from __future__ import annotations

import shutil

import pytest

from openhive.core import paths
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.tools.prompt import workspace_tools_section
from teams.agent import agent_spec_for, run_team_session
from teams.prompt import TOOL_NAMES

from .conftest import set_config

pytestmark = pytest.mark.django_db


def script(status_url: str) -> list[dict]:
    return [
        {
            "when": {"team": "ops", "last": "user", "matches": "(?i)status page"},
            "reply": {"tool_calls": [{"name": "web_fetch", "arguments": {"url": status_url}}]},
        },
        {
            "when": {"team": "ops", "last": "tool", "tool": "web_fetch"},
            "reply": {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {
                            "path": "reports/status.md",
                            "content": "# Status\n\nAll systems operational.\n",
                        },
                    }
                ]
            },
        },
        {
            "when": {"team": "ops", "last": "tool", "tool": "write_file"},
            "reply": {
                "tool_calls": [{"name": "read_file", "arguments": {"path": "../../../etc/passwd"}}]
            },
        },
        {
            "when": {"team": "ops", "last": "tool", "tool": "read_file"},
            "reply": {"content": "Report written to reports/status.md."},
        },
    ]


def test_ops_fetches_the_status_page_and_writes_a_report(ops, loopback, scripted_provider):
    scripted_provider(script(loopback.url("/html")))
    outcome = run_team_session(ops, "fetch the status page and write a report")
    assert outcome.ok, outcome.error
    assert outcome.content == "Report written to reports/status.md."
    assert (paths.team_dir("ops") / "reports" / "status.md").read_text().startswith("# Status")
    calls = list(ToolCall.objects.filter(session_id=outcome.session_id).order_by("id"))
    assert [(c.tool, c.success) for c in calls] == [
        ("web_fetch", True),
        ("write_file", True),
        ("read_file", False),
    ]
    assert calls[0].result["status"] == 200 and "operational" in calls[0].result["body"]
    assert calls[2].result["code"] == "PATH_OUTSIDE_BOUNDARY"
    # The model saw the refusal and its code in the tool message.
    last_request = LlmExchange.objects.filter(session_id=outcome.session_id).order_by("turn")
    assert "PATH_OUTSIDE_BOUNDARY" in str(last_request.last().request_messages)


def test_the_prompt_names_the_tools_and_the_workspace(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    spec = agent_spec_for(ops)
    prompt = "\n".join(str(m["content"]) for m in spec.system_messages)
    assert "## Your workspace and tools" in prompt
    assert str(paths.team_dir("ops")) in prompt
    for name in ("read_file", "write_file", "edit_file", "glob", "grep", "bash", "web_fetch"):
        assert f"`{name}`" in prompt
    assert {"read_file", "bash", "web_fetch"} <= {s.name for s in spec.tools}


def test_the_prompt_lists_only_the_tools_the_team_is_allowed(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    set_config("ops", allowed_tools=["read_file", "glob", "memory_*"])
    spec = agent_spec_for(ops)
    prompt = "\n".join(str(m["content"]) for m in spec.system_messages)
    assert "`read_file`" in prompt and "`glob`" in prompt
    assert "`bash`" not in prompt and "`web_fetch`" not in prompt and "`write_file`" not in prompt
    assert {"bash", "web_fetch", "write_file"}.isdisjoint(s.name for s in spec.tools)
    set_config("ops", allowed_tools=["memory_*"])
    prompt = "\n".join(str(m["content"]) for m in agent_spec_for(ops).system_messages)
    assert "Your workspace and tools" not in prompt


def test_the_main_agents_chat_turn_gets_no_reach_tools(main_team, scripted_provider):
    from openhive.chat.turn import ROUTING_TOOLS

    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    spec = agent_spec_for(main_team, only_tools=ROUTING_TOOLS)
    names = {s.name for s in spec.tools}
    assert names.isdisjoint(
        {"read_file", "write_file", "edit_file", "glob", "grep", "bash", "web_fetch"}
    )
    prompt = "\n".join(str(m["content"]) for m in spec.system_messages)
    assert "Your workspace and tools" not in prompt


def test_the_section_is_empty_without_tool_names(ops):
    from openhive.core.prompt_sections import PromptContext

    assert workspace_tools_section(PromptContext(team=ops, data={})) == ""
    assert "bash" in workspace_tools_section(PromptContext(team=ops, data={TOOL_NAMES: ["bash"]}))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_bash_in_a_session_is_sandboxed_and_audited(ops, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"team": "ops", "last": "user"},
                "reply": {"tool_calls": [{"name": "bash", "arguments": {"command": "ls /"}}]},
            },
            {"when": {"team": "ops", "last": "tool", "tool": "bash"}, "reply": {"content": "done"}},
        ]
    )
    outcome = run_team_session(ops, "list the root folder")
    assert outcome.ok and Session.objects.get(pk=outcome.session_id).stop_reason == "completed"
    row = ToolCall.objects.get(session_id=outcome.session_id, tool="bash")
    assert row.success and row.result["sandboxed"] is True
    assert "data" not in row.result["stdout"].split()

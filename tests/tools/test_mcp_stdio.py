"""MCP servers run as stdio subprocesses: real servers from the package registry
(mcp-server-time, mcp-server-git) and the SDK-built fixture server, called as a team would."""

from __future__ import annotations

import subprocess
import time

import pytest

from openhive.engine.models import ToolCall
from openhive.tools.mcpclient.source import manager
from openhive.tools.models import McpServerStatus
from teams.agent import run_team_session
from vault.services import vault_store_secret

from .conftest import set_config
from .mcp_helpers import FIXTURE, call_as, offered

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def servers_stopped():
    yield
    manager().shutdown()


def status(team, server: str) -> McpServerStatus:
    return McpServerStatus.objects.get(team=team, server=server)


def test_time_server_tools_are_offered_with_portable_schemas_and_called_as_the_team(ops):
    set_config(
        "ops", mcp_servers={"time": {"command": "mcp-server-time"}}, allowed_tools=["mcp__time__*"]
    )
    tools = offered(ops)
    assert set(tools) == {"mcp__time__get_current_time", "mcp__time__convert_time"}
    schema = tools["mcp__time__get_current_time"].function_schema()["function"]["parameters"]
    assert schema["additionalProperties"] is False and schema["required"] == ["timezone"]
    assert "title" not in schema and "title" not in schema["properties"]["timezone"]

    result = call_as(ops, "mcp__time__get_current_time", timezone="Europe/Paris")
    assert result["success"] is True
    assert result["structured"]["timezone"] == "Europe/Paris"
    assert '"timezone": "Europe/Paris"' in result["text"]
    row = ToolCall.objects.get(tool="mcp__time__get_current_time")
    assert row.success and row.team_name == "ops" and row.arguments == {"timezone": "Europe/Paris"}
    state = status(ops, "time")
    assert state.state == "running" and state.transport == "stdio"
    assert {t["name"] for t in state.tools} == {"get_current_time", "convert_time"}


def test_a_session_calls_an_mcp_tool_through_the_scripted_model(ops, scripted_provider):
    set_config(
        "ops",
        mcp_servers={"time": {"command": "mcp-server-time"}},
        allowed_tools=["mcp__time__get_current_time"],
    )
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "tool_calls": [
                        {"name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}}
                    ]
                },
            },
            {"when": {"last": "tool"}, "reply": {"content": "it is late"}},
        ]
    )
    outcome = run_team_session(ops, "what time is it?")
    assert outcome.ok and outcome.content == "it is late"
    call = ToolCall.objects.get(session_id=outcome.session_id)
    assert call.success and call.result["structured"]["timezone"] == "UTC"


def test_git_server_reads_a_repository_made_in_the_workspace(ops, workspace):
    repo = workspace / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=Ops", "-c", "user.email=ops@example.org", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "notes.txt").write_text("hello\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "First notes from ops"], check=True)
    set_config(
        "ops",
        mcp_servers={
            "git": {"command": "mcp-server-git", "args": ["--repository", "."], "cwd": "repo"}
        },
        allowed_tools=["mcp__git__*"],
    )
    assert "mcp__git__git_log" in offered(ops)
    result = call_as(ops, "mcp__git__git_log", repo_path=str(repo))
    assert result["success"] is True, result
    assert "First notes from ops" in result["text"]
    (repo / "notes.txt").write_text("changed\n")
    status_result = call_as(ops, "mcp__git__git_status", repo_path=str(repo))
    assert "notes.txt" in status_result["text"]


def test_the_server_never_sees_the_workers_secret_environment(ops, monkeypatch):
    monkeypatch.setenv("OPENHIVE_WORKER_SECRET", "worker-only-value-123")
    set_config("ops", mcp_servers={"fx": FIXTURE}, allowed_tools=["mcp__fx__*"])
    assert call_as(ops, "mcp__fx__env", name="OPENHIVE_WORKER_SECRET")["text"] == "(unset)"
    assert call_as(ops, "mcp__fx__env", name="PATH")["text"] != "(unset)"


@pytest.mark.usefixtures("vault_key")
def test_a_vault_value_reaches_the_server_but_never_comes_back_to_the_model(ops):
    secret = "vault-held-token-9f8e7d6c"
    vault_store_secret(team=ops, key="fx_token", value=secret, updated_by="test")
    set_config(
        "ops",
        mcp_servers={"fx": {**FIXTURE, "env": {"FX_TOKEN": "{{vault:fx_token}}"}}},
        allowed_tools=["mcp__fx__*"],
    )
    result = call_as(ops, "mcp__fx__env", name="FX_TOKEN")
    assert result["success"] is True and result["text"] == "[REDACTED]"
    echoed = call_as(ops, "mcp__fx__echo", text=f"token is {secret}", times=2)
    assert secret not in str(echoed) and echoed["text"].count("[REDACTED]") == 2
    for row in ToolCall.objects.all():
        assert secret not in str(row.arguments) + str(row.result) + row.error


def test_allowlist_globs_choose_the_offered_tools_and_refuse_the_rest(ops):
    set_config("ops", mcp_servers={"fx": FIXTURE}, allowed_tools=["mcp__fx__ec*"])
    assert [n for n in offered(ops) if n.startswith("mcp__")] == ["mcp__fx__echo"]
    refused = call_as(ops, "mcp__fx__env", name="PATH")
    assert refused["success"] is False and refused["code"] in ("TOOL_NOT_ALLOWED", "UNKNOWN_TOOL")
    # An allowlist no MCP tool can match does not even start the server.
    set_config("ops", allowed_tools=["read_file"])
    manager().shutdown()
    McpServerStatus.objects.all().delete()
    assert not [n for n in offered(ops) if n.startswith("mcp__")]
    assert not McpServerStatus.objects.exists()


def test_a_team_not_given_a_server_never_sees_its_tools(ops, main_team, openhive_dirs):
    (openhive_dirs / "data" / "config" / "mcp_servers.yaml").write_text(
        "servers:\n  shared-time:\n    command: mcp-server-time\n"
    )
    set_config("ops", mcp_servers={"clock": "shared-time"}, allowed_tools=["*"])
    assert "mcp__clock__get_current_time" in offered(ops)
    assert not [n for n in offered(main_team) if n.startswith("mcp__")]
    refused = call_as(main_team, "mcp__clock__get_current_time", timezone="UTC")
    assert refused["success"] is False and refused["code"] == "UNKNOWN_TOOL"


def test_a_missing_command_is_a_clear_status_and_no_crash(ops, scripted_provider):
    set_config(
        "ops", mcp_servers={"ghost": {"command": "no-such-mcp-server-here"}}, allowed_tools=["*"]
    )
    assert not [n for n in offered(ops) if n.startswith("mcp__")]
    state = status(ops, "ghost")
    assert state.state == "failed"
    assert 'command "no-such-mcp-server-here" not found' in state.last_error
    scripted_provider([{"when": {"last": "user"}, "reply": {"content": "still here"}}])
    assert run_team_session(ops, "hello").ok


def test_a_server_that_exits_at_start_shows_its_last_output(ops):
    exits = {
        "command": FIXTURE["command"],
        "args": ["-c", "import sys; print('bad licence file', file=sys.stderr); sys.exit(3)"],
    }
    set_config("ops", mcp_servers={"quits": exits}, allowed_tools=["*"])
    offered(ops)
    state = status(ops, "quits")
    assert state.state == "failed" and "bad licence file" in state.last_error


def test_a_server_that_dies_mid_call_gives_a_tool_error_then_restarts(ops):
    set_config("ops", mcp_servers={"fx": FIXTURE}, allowed_tools=["mcp__fx__*"])
    died = call_as(ops, "mcp__fx__crash")
    assert died["success"] is False and died["code"] == "MCP_SERVER_UNAVAILABLE"
    assert "stopped while answering" in died["error"]
    assert "crashing on purpose" in died["error"]
    state = status(ops, "fx")
    assert state.state == "failed" and "crashing on purpose" in state.last_error
    # The cached tool list keeps the tools offered; a call inside the backoff says when.
    assert "mcp__fx__echo" in offered(ops)
    early = call_as(ops, "mcp__fx__echo", text="x")
    assert early["code"] == "MCP_SERVER_UNAVAILABLE" and "next start attempt in" in early["error"]
    key = (ops.pk, "fx")
    count, _at, error = manager()._failures[key]
    manager()._failures[key] = (count, 0.0, error)  # the backoff has passed
    assert call_as(ops, "mcp__fx__echo", text="back")["text"] == "back"
    assert status(ops, "fx").state == "running"


def test_a_tool_error_from_the_server_is_a_clear_failure(ops):
    set_config("ops", mcp_servers={"fx": FIXTURE}, allowed_tools=["mcp__fx__*"])
    result = call_as(ops, "mcp__fx__refuse", reason="not today")
    assert result["success"] is False and result["code"] == "MCP_TOOL_ERROR"
    assert "refuse" in result["error"]
    missing = call_as(ops, "mcp__fx__echo")
    assert missing["success"] is False


def test_the_tool_list_is_refreshed_when_the_server_says_it_changed(ops):
    set_config("ops", mcp_servers={"fx": FIXTURE}, allowed_tools=["mcp__fx__*"])
    assert "mcp__fx__extra" not in offered(ops)
    assert call_as(ops, "mcp__fx__grow")["text"] == "grown"
    for _ in range(100):  # the notification arrives on the client's loop thread
        if "mcp__fx__extra" in offered(ops):
            break
        time.sleep(0.05)
    assert "mcp__fx__extra" in offered(ops)
    assert call_as(ops, "mcp__fx__extra")["text"] == "extra!"
    assert "extra" in {t["name"] for t in status(ops, "fx").tools}


def test_an_idle_server_is_stopped_and_started_again_on_use(ops):
    set_config(
        "ops", mcp_servers={"fx": {**FIXTURE, "idle_seconds": 60}}, allowed_tools=["mcp__fx__*"]
    )
    assert call_as(ops, "mcp__fx__echo", text="one")["success"]
    assert manager().reap_idle() == []  # just used
    stopped = manager().reap_idle(now=time.monotonic() + 61)
    assert [plan.name for plan in stopped] == ["fx"]
    assert status(ops, "fx").state == "stopped"
    assert call_as(ops, "mcp__fx__echo", text="two")["text"] == "two"
    assert status(ops, "fx").state == "running"


def test_a_cwd_outside_the_workspace_is_refused(ops):
    set_config("ops", mcp_servers={"fx": {**FIXTURE, "cwd": "../../"}}, allowed_tools=["*"])
    assert not [n for n in offered(ops) if n.startswith("mcp__")]
    assert not McpServerStatus.objects.exists()  # never started


def test_the_cli_calls_a_teams_mcp_tool(ops, capsys):
    from django.core.management import call_command

    set_config(
        "ops", mcp_servers={"time": {"command": "mcp-server-time"}}, allowed_tools=["mcp__time__*"]
    )
    call_command("openhive", "tool", "ops", "mcp__time__get_current_time", '{"timezone": "UTC"}')
    assert '"timezone": "UTC"' in capsys.readouterr().out


def test_a_slow_call_times_out_and_the_server_stays_usable(ops):
    set_config(
        "ops", mcp_servers={"fx": {**FIXTURE, "timeout_seconds": 1}}, allowed_tools=["mcp__fx__*"]
    )
    slow = call_as(ops, "mcp__fx__nap", seconds=20)
    assert slow["success"] is False and slow["code"] == "TIMEOUT"
    assert "within 1 s" in slow["error"]
    assert ToolCall.objects.get(tool="mcp__fx__nap").duration_ms < 10_000
    assert call_as(ops, "mcp__fx__echo", text="awake")["text"] == "awake"


def test_sessions_calling_at_once_share_one_started_server():
    """Four sessions of a team (threads of one worker) call a server that is not running:
    it starts once and answers them all over the same client session."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from openhive.tools.mcpclient.runtime import McpManager
    from openhive.tools.mcpclient.servers import ServerPlan
    from teams.config import McpServerConfig

    events: list[str] = []
    local = McpManager(lambda plan, state, tools, error: events.append(state))
    plan = ServerPlan(
        team_id=1,
        team_name="ops",
        name="fx",
        config=McpServerConfig(**FIXTURE),
        env={"PATH": os.environ["PATH"]},
        fingerprint="one",
    )
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(lambda i: local.call(plan, "echo", {"text": f"s{i}"}), range(4))
            )
    finally:
        local.shutdown()
    assert [a.content[0].text for a in answers] == ["s0", "s1", "s2", "s3"]
    assert events == ["running"]

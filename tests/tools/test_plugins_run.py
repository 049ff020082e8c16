"""Calling a plugin: offered as plugin__{name} where the allowlist admits it, run in the
sandbox through call_tool (a session with the scripted provider, and the `tool` CLI verb),
one audit row per call with the code's hash; argument, result and verification failures are
clear tool errors; the lifecycle (deprecate, remove, verify) in services and the admin."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from io import StringIO

import pytest
import yaml
from django.core.management import call_command

from openhive.core import paths
from openhive.core.registry import team_tools
from openhive.engine.models import ToolCall
from openhive.tools.models import Plugin
from openhive.tools.plugins.services import plugin_deprecate, plugin_remove, plugin_verify
from teams.agent import run_team_session
from tests.e2e.conftest import ROOT, database_url  # noqa: F401  (a fixture)
from tests.tools.conftest import set_config

from .plugin_helpers import ADD, call_as, needs_bwrap, plugin, register

pytestmark = [pytest.mark.django_db, needs_bwrap]
DIGEST = hashlib.sha256(ADD.encode()).hexdigest()


@pytest.fixture
def added(ops) -> Plugin:
    assert register(ops, "add", ADD)["success"]
    return Plugin.objects.get(team=ops, tool_name="add")


def test_a_plugin_call_runs_in_the_sandbox_and_is_audited_with_its_hash(ops, added):
    result = call_as(ops, "plugin__add", a=2, b=40)
    assert result["success"], result
    assert result["result"] == {"sum": 42, "pi": 3.14}
    assert result["code_sha256"] == DIGEST and result["plugin"] == "plugin__add"
    assert result["sandboxed"] is True
    assert "thinking out loud" in result["stderr"]  # printed text never mixes into the result
    audit = ToolCall.objects.get(tool="plugin__add")
    assert audit.success and audit.team_id == ops.pk
    assert audit.arguments == {"a": 2, "b": 40}
    assert audit.result["code_sha256"] == DIGEST


def test_the_allowlist_decides_whether_plugins_are_offered(ops, added):
    assert "plugin__add" in {s.name for s in team_tools(ops, ["plugin__*"])}
    assert "plugin__add" not in {s.name for s in team_tools(ops, ["read_file", "bash"])}
    schema = next(s for s in team_tools(ops, ["plugin__*"])).function_schema()
    assert schema["function"]["name"] == "plugin__add"
    assert schema["function"]["parameters"]["required"] == ["a", "b"]
    refused = call_as(ops, "plugin__add", ["read_file"], a=1, b=2)
    assert refused["success"] is False and refused["code"] in ("TOOL_NOT_ALLOWED", "UNKNOWN_TOOL")


def test_a_session_calls_a_plugin(ops, added, scripted_provider):
    set_config("ops", allowed_tools=["plugin__*"])
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {"tool_calls": [{"name": "plugin__add", "arguments": {"a": 1, "b": 2}}]},
            },
            {"when": {"last": "tool", "tool": "plugin__add"}, "reply": {"content": "3 it is"}},
        ]
    )
    outcome = run_team_session(ops, "add 1 and 2")
    assert outcome.ok and outcome.content == "3 it is"
    call = ToolCall.objects.get(session_id=outcome.session_id)
    assert call.tool == "plugin__add" and call.success
    assert call.result["result"]["sum"] == 3 and call.result["code_sha256"] == DIGEST


def test_the_tool_cli_verb_calls_a_plugin(ops, added):
    set_config("ops", allowed_tools=["plugin__*"])
    out = StringIO()
    call_command("openhive", "tool", "ops", "plugin__add", '{"a": 5, "b": 6}', stdout=out)
    result = json.loads(out.getvalue())
    assert result["success"] and result["result"]["sum"] == 11
    assert result["code_sha256"] == DIGEST


def test_the_tool_cli_in_its_own_process_registers_and_calls_a_plugin(tmp_path, database_url):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "OPENHIVE_"))}
    env["OPENHIVE_DATA_DIR"] = str(tmp_path / "data")
    if database_url:
        env["DATABASE_URL"] = database_url

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", "openhive", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert cli("init", "--no-user").returncode == 0
    assert cli("spawn", "calc", "--scope", "sums").returncode == 0
    config = tmp_path / "data" / "run" / "teams" / "calc" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["allowed_tools"] = ["register_plugin_tool", "plugin__*"]
    config.write_text(yaml.safe_dump(data))
    arguments = json.dumps({"tool_name": "add", "source_code": ADD})
    registered = cli("tool", "calc", "register_plugin_tool", arguments)
    assert registered.returncode == 0, registered.stdout + registered.stderr
    called = cli("tool", "calc", "plugin__add", '{"a": 20, "b": 22}')
    assert called.returncode == 0, called.stdout + called.stderr
    result = json.loads(called.stdout)
    assert result["result"]["sum"] == 42 and result["code_sha256"] == DIGEST


def test_arguments_are_checked_against_the_plugins_schema(ops, added):
    result = call_as(ops, "plugin__add", a="two", b=2)
    assert result["success"] is False and result["code"] == "INVALID_ARGUMENTS"
    assert "a: 'two' is not of type 'number'" in result["error"]
    missing = call_as(ops, "plugin__add", a=1)
    assert (
        missing["code"] == "INVALID_ARGUMENTS"
        and "'b' is a required property" in (missing["error"])
    )
    assert ToolCall.objects.filter(tool="plugin__add", success=False).count() == 2


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ("return object()", "PLUGIN_BAD_RESULT", "not JSON-serialisable"),
        ("return float('nan')", "PLUGIN_BAD_RESULT", "not JSON-serialisable"),
        ("raise KeyError('missing')", "PLUGIN_ERROR", "KeyError: 'missing'"),
        ("import sys\nsys.exit(3)", "PLUGIN_ERROR", "SystemExit: 3"),
        ("import os\nos._exit(4)", "PLUGIN_CRASHED", "exited with status 4"),
        ("return 'x' * 300000", "OUTPUT_LIMIT", "over 200000 bytes"),
    ],
)
def test_a_bad_result_is_a_clear_tool_error(ops, body, code, words):
    assert register(ops, "bad", plugin(body))["success"]
    result = call_as(ops, "plugin__bad")
    assert result["success"] is False and result["code"] == code, result
    assert words in result["error"] and result["code_sha256"]


def test_a_tampered_file_fails_verification_and_is_not_run(ops, added):
    path = paths.team_dir("ops") / "plugins" / "add.py"
    path.write_text(ADD.replace('args["a"] + args["b"]', "666"))
    result = call_as(ops, "plugin__add", a=1, b=2)
    assert result["success"] is False and result["code"] == "FAILED_VERIFICATION"
    assert "no longer matches its hash" in result["error"]
    added.refresh_from_db()
    assert added.status == "failed_verification"
    assert "plugin__add" not in {s.name for s in team_tools(ops, ["*"])}
    path.write_text(ADD)  # the operator restores it and verifies
    assert plugin_verify(plugin=added).status == "active"
    assert call_as(ops, "plugin__add", a=1, b=2)["result"]["sum"] == 3


def test_a_missing_file_fails_verification(ops, added):
    (paths.team_dir("ops") / "plugins" / "add.py").unlink()
    result = call_as(ops, "plugin__add", a=1, b=2)
    assert result["code"] == "FAILED_VERIFICATION" and "missing" in result["error"]


def test_deprecate_then_remove_keeps_the_row_and_frees_the_name(ops, added):
    with pytest.raises(Exception, match="deprecate it before removing"):
        plugin_remove(plugin=added, by="op")
    with pytest.raises(Exception, match="reason is required"):
        plugin_deprecate(plugin=added, reason="  ", by="op")
    plugin_deprecate(plugin=added, reason="replaced by web_fetch", by="op")
    result = call_as(ops, "plugin__add", a=1, b=2)
    assert result["success"] is False and result["code"] in ("UNKNOWN_TOOL", "PLUGIN_UNAVAILABLE")
    again = register(ops, "add", ADD)
    assert again["code"] == "RESERVED_NAME" and "replaced by web_fetch" in again["error"]
    plugin_remove(plugin=added, by="op")
    added.refresh_from_db()
    assert added.status == "removed" and added.status_changed_by == "op"
    assert not (paths.team_dir("ops") / "plugins" / "add.py").exists()
    assert register(ops, "add", ADD)["success"]  # a removed name may be used again
    assert Plugin.objects.filter(team=ops, tool_name="add").count() == 2


def test_a_plugin_deprecated_during_a_session_is_not_run(ops, added):
    offered = {s.name: s for s in team_tools(ops, ["*"])}
    plugin_deprecate(plugin=added, reason="stop", by="op")
    from openhive.core.context import ToolContext
    from openhive.engine.tool_calls import call_tool

    ctx = ToolContext(team=ops, allowed_tools=["*"], tools=offered)
    result = call_tool(ctx, "plugin__add", {"a": 1, "b": 2})
    assert result["success"] is False and result["code"] == "PLUGIN_UNAVAILABLE"
    assert "deprecated" in result["error"]


def test_the_admin_shows_source_hash_and_state_and_runs_the_actions(admin_client, ops, added):
    listing = admin_client.get("/admin/tools/plugin/").content.decode()
    assert "plugin__add" in listing and DIGEST[:12] in listing and "active" in listing
    page = admin_client.get(f"/admin/tools/plugin/{added.pk}/change/").content.decode()
    assert "Add two numbers" in page and DIGEST in page and "matches the hash" in page
    assert "thinking out loud" in page  # the source
    url = "/admin/tools/plugin/"
    data = {"action": "deprecate", "_selected_action": [added.pk], "reason": "", "index": 0}
    admin_client.post(url, data)
    added.refresh_from_db()
    assert added.status == "active"  # a reason is required
    admin_client.post(url, {**data, "reason": "not needed"})
    added.refresh_from_db()
    assert (added.status, added.status_reason) == ("deprecated", "not needed")
    admin_client.post(url, {**data, "action": "remove"})
    added.refresh_from_db()
    assert added.status == "removed"
    assert "plugin__add" in admin_client.get(url + "?status=removed").content.decode()


def test_the_prompt_explains_register_plugin_tool_when_it_is_offered(ops):
    from openhive.core.prompt_sections import PromptContext
    from openhive.tools.prompt import workspace_tools_section
    from teams.prompt import TOOL_NAMES

    section = workspace_tools_section(
        PromptContext(team=ops, data={TOOL_NAMES: ["register_plugin_tool"]})
    )
    assert "plugin__<name>" in section and "standard library only" in section
    assert "register_plugin_tool" not in workspace_tools_section(
        PromptContext(team=ops, data={TOOL_NAMES: ["bash"]})
    )


def test_results_come_back_exactly_whatever_they_hold(ops):
    body = """
    return {
        "text": 'quote " backslash \\\\ newline \\n tab \\t bell \\x07 é 漢 🐝',
        "numbers": [0, -1, 2**70, 1.5, -0.0, 1e-300, True, False, None],
        "nested": {"a": [{"b": []}, {}], 1: "int key", None: "none key"},
        "tuple": (1, 2),
        "args": args,
    }
    """
    assert register(ops, "echo", plugin(body, parameters='{"type": "object"}'))["success"]
    sent = {"x": ["ü", {"y": 1.25}], "z": "\\u0000 and \\u001f"}
    result = call_as(ops, "plugin__echo", **sent)
    assert result["success"], result
    value = result["result"]
    assert value["text"] == 'quote " backslash \\ newline \n tab \t bell \x07 é 漢 🐝'
    assert value["numbers"] == [0, -1, 2**70, 1.5, -0.0, 1e-300, True, False, None]
    assert value["nested"] == {"a": [{"b": []}, {}], "1": "int key", "null": "none key"}
    assert value["tuple"] == [1, 2] and value["args"] == sent


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("return {1, 2}", "Object of type set is not JSON serializable"),
        ("return {(1, 2): 'tuple key'}", "keys must be str"),
        ("value = []\nvalue.append(value)\nreturn value", "nested too deeply"),
        ("return float('inf')", "not JSON compliant"),
    ],
)
def test_a_result_json_cannot_hold_is_refused(ops, body, words):
    assert register(ops, "odd", plugin(body))["success"]
    result = call_as(ops, "plugin__odd")
    assert result["success"] is False and result["code"] == "PLUGIN_BAD_RESULT", result
    assert words in result["error"]


def test_without_bubblewrap_no_plugin_runs_unless_the_operator_opts_in(
    ops, added, monkeypatch, settings
):
    from openhive.core import sandbox

    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    result = call_as(ops, "plugin__add", a=1, b=2)
    assert result["success"] is False and result["code"] == "SANDBOX_UNAVAILABLE"
    assert "OPENHIVE_ALLOW_UNSANDBOXED" in result["error"]
    refused = register(ops, "other", ADD)
    assert refused["code"] == "INVALID_INTERFACE" and "cannot run" in refused["error"]
    settings.OPENHIVE = {**settings.OPENHIVE, "ALLOW_UNSANDBOXED": True}
    unconfined = call_as(ops, "plugin__add", a=1, b=2)
    assert unconfined["success"] and unconfined["result"]["sum"] == 3
    assert unconfined["sandboxed"] is False


def test_a_symlink_planted_in_plugins_is_not_followed(ops, added, openhive_dirs, admin_client):
    outside = openhive_dirs / "data" / "copy.py"
    outside.write_text(ADD)  # the very same bytes, but outside the workspace
    path = paths.team_dir("ops") / "plugins" / "add.py"
    path.unlink()
    path.symlink_to(outside)
    result = call_as(ops, "plugin__add", a=1, b=2)
    assert result["success"] is False and result["code"] == "FAILED_VERIFICATION"
    page = admin_client.get(f"/admin/tools/plugin/{added.pk}/change/").content.decode()
    assert "the file is not on disk" in page and "thinking out loud" not in page


def test_a_team_registers_a_plugin_in_one_session_and_uses_it_in_the_next(ops, scripted_provider):
    set_config("ops", allowed_tools=["register_plugin_tool", "plugin__*"])
    scripted_provider(
        [
            {
                "when": {"last": "user", "matches": "write"},
                "reply": {
                    "tool_calls": [
                        {
                            "name": "register_plugin_tool",
                            "arguments": {"tool_name": "add", "source_code": ADD},
                        }
                    ]
                },
            },
            {
                "when": {"last": "user", "matches": "use"},
                "reply": {"tool_calls": [{"name": "plugin__add", "arguments": {"a": 4, "b": 5}}]},
            },
            {"when": {"last": "tool", "tool": "register_plugin_tool"}, "reply": {"content": "ok"}},
            {"when": {"last": "tool", "tool": "plugin__add"}, "reply": {"content": "nine"}},
        ]
    )
    first = run_team_session(ops, "write an adder")
    assert first.ok and first.content == "ok"
    registered = ToolCall.objects.get(session_id=first.session_id)
    assert registered.success and registered.result["tool"] == "plugin__add"
    second = run_team_session(ops, "use the adder")
    assert second.ok and second.content == "nine"
    used = ToolCall.objects.get(session_id=second.session_id)
    assert used.tool == "plugin__add" and used.result["result"]["sum"] == 9
    assert used.result["code_sha256"] == DIGEST

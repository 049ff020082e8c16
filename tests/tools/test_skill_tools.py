"""The skill tools through the real door (call_tool, and sessions with the scripted provider):
progressive disclosure (the body reaches the model only on activation), required tools added
for the rest of the session within the allowlist, files contained in the skill's folder,
scripts in the bash sandbox, and replay of a session that activates a skill."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from openhive.core import paths
from openhive.engine.models import LlmExchange, Session, ToolCall
from teams.agent import run_team_session
from tests.engine.replay_support import replay
from tests.teams.skill_support import write_skill

from .conftest import set_config

pytestmark = pytest.mark.django_db
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)"
)
BODY_MARK = "Write the weekly disk report"
SCRIPT = """import json, os, sys
data = json.load(sys.stdin)
with open("report.txt", "w") as out:
    out.write("report for " + data["server"])
print(json.dumps({"args": sys.argv[1:], "skill_dir": os.environ["SKILL_DIR"], "cwd": os.getcwd()}))
"""


@pytest.fixture
def skill(ops):
    return write_skill(
        "ops",
        "disk-report",
        files={"scripts/usage.py": SCRIPT, "reference.md": "Thresholds: warn at 80%."},
    )


def test_activate_skill_returns_the_body_and_the_tools_it_brings(call, skill):
    set_config("ops", allowed_tools=["activate_skill", "bash"])
    result = call("activate_skill", name="disk-report")
    assert result["success"], result
    assert result["skill"] == "disk-report" and BODY_MARK in result["instructions"]
    # The call's context offers no tools yet: bash joins it; web_fetch is required but outside
    # the team's allowlist, so it is never added.
    assert result["tools_added"] == ["bash"]
    assert result["tools_not_permitted"] == ["web_fetch"]
    assert "not in your allowed tools" in result["note"]


def test_unknown_and_broken_skills_are_clear_errors(call, ops):
    write_skill("ops", "broken", description=None)
    unknown = call("activate_skill", name="nope")
    assert (unknown["success"], unknown["code"]) == (False, "SKILL_NOT_FOUND")
    assert "available: none" in unknown["error"]
    broken = call("activate_skill", name="broken")
    assert broken["code"] == "SKILL_INVALID" and "no `description`" in broken["error"]


def test_the_main_team_has_no_skills(call, main_team):
    write_skill("main", "disk-report")
    result = call("activate_skill", team=main_team, name="disk-report")
    assert result["code"] == "NOT_ALLOWED" and "routes work" in result["error"]


def test_list_and_read_the_files_of_a_skill(call, skill):
    listed = call("list_skill_files", name="disk-report")
    assert listed["files"] == [
        {"path": "SKILL.md", "bytes": skill.stat().st_size},
        {"path": "reference.md", "bytes": 24},
        {"path": "scripts/usage.py", "bytes": len(SCRIPT)},
    ]
    read = call("read_skill_file", name="disk-report", path="reference.md")
    assert read["success"] and read["content"] == "Thresholds: warn at 80%."


@pytest.mark.parametrize(
    "path",
    [
        "../../config.yaml",
        "../other/SKILL.md",
        "/etc/passwd",
        "scripts/../../../team-rules/x.md",
        "reference.md\x00.txt",
    ],
)
def test_read_skill_file_refuses_paths_outside_the_skill_folder(call, skill, path):
    result = call("read_skill_file", name="disk-report", path=path)
    assert (result["success"], result["code"]) == (False, "PATH_OUTSIDE_BOUNDARY"), result


def test_a_symlink_in_the_skill_folder_cannot_lead_out(call, skill, openhive_dirs):
    secret = openhive_dirs / "data" / "private.txt"
    secret.write_text("data-dir-secret")
    os.symlink(secret, skill.parent / "leak.md")
    result = call("read_skill_file", name="disk-report", path="leak.md")
    assert result["code"] == "PATH_OUTSIDE_BOUNDARY"
    names = [f["path"] for f in call("list_skill_files", name="disk-report")["files"]]
    assert "leak.md" not in names


def test_a_single_file_skill_has_no_files(call, ops):
    write_skill("ops", "triage", single_file=True)
    assert call("list_skill_files", name="triage")["files"] == []
    result = call("read_skill_file", name="triage", path="x.md")
    assert result["code"] == "NO_SKILL_FILES"


@needs_bwrap
def test_a_skill_script_runs_in_the_sandbox_with_the_skill_folder_visible(call, skill, workspace):
    result = call(
        "run_skill_script",
        name="disk-report",
        script="scripts/usage.py",
        args=["--fast"],
        stdin=json.dumps({"server": "db1"}),
    )
    assert result["success"], result
    assert result["sandboxed"] is True and result["exit_code"] == 0
    out = json.loads(result["stdout"])
    assert out["args"] == ["--fast"] and out["cwd"] == str(workspace.resolve())
    assert out["skill_dir"] == str(skill.parent.resolve())
    assert (workspace / "report.txt").read_text() == "report for db1"


@needs_bwrap
def test_a_skill_script_cannot_reach_the_data_dir(call, skill, openhive_dirs):
    (openhive_dirs / "data" / "private.txt").write_text("data-dir-secret")
    (skill.parent / "scripts" / "peek.sh").write_text(f"cat {openhive_dirs}/data/private.txt")
    result = call("run_skill_script", name="disk-report", script="scripts/peek.sh")
    assert result["success"] is False and result["exit_code"] != 0
    assert "data-dir-secret" not in result["stdout"]


def test_run_skill_script_refuses_scripts_outside_the_folder_and_unknown_kinds(call, skill):
    escape = call("run_skill_script", name="disk-report", script="../../config.yaml")
    assert escape["code"] == "PATH_OUTSIDE_BOUNDARY"
    missing = call("run_skill_script", name="disk-report", script="scripts/none.py")
    assert missing["code"] == "NOT_FOUND"
    odd = call("run_skill_script", name="disk-report", script="reference.md")
    assert odd["code"] == "INVALID_SCRIPT"


# --- in a session --------------------------------------------------------------------------------

ACTIVATE = [
    {
        "when": {"last": "user"},
        "reply": {"tool_calls": [{"name": "activate_skill", "arguments": {"name": "disk-report"}}]},
    },
    {
        "when": {"last": "tool", "tool": "activate_skill"},
        "reply": {"tool_calls": [{"name": "read_file", "arguments": {"path": "config.yaml"}}]},
    },
    {"when": {"last": "tool"}, "reply": {"content": "Report written."}},
]


def request_text(exchange: LlmExchange) -> str:
    return json.dumps(exchange.request_messages, ensure_ascii=False)


@pytest.fixture
def activated_session(ops, skill, scripted_provider) -> Session:
    """A session narrowed to activate_skill (as a subagent's may be); the skill requires bash
    and web_fetch, and the team's allowlist permits read_file and bash only."""
    set_config("ops", allowed_tools=["activate_skill", "read_file", "bash"])
    (skill.parent / "SKILL.md").write_text(
        skill.read_text().replace("- bash — for the checks", "- bash\n- read_file")
    )
    scripted_provider(ACTIVATE)
    outcome = run_team_session(ops, "Write the disk report", only_tools=["activate_skill"])
    assert outcome.ok and outcome.content == "Report written.", outcome
    assert outcome.effects["skills_activated"] == ["disk-report"]
    return Session.objects.get(pk=outcome.session_id)


def test_the_body_reaches_the_model_only_after_activation(activated_session):
    first, second, _ = activated_session.exchanges.order_by("turn")
    assert BODY_MARK not in request_text(first)
    assert "- disk-report — Weekly disk report" in request_text(first)
    # The second request is the first plus the reply and the tool result that carried the body.
    assert BODY_MARK in request_text(second)
    tool_message = second.request_messages[-1]
    assert tool_message["role"] == "tool" and BODY_MARK in tool_message["content"]


def test_required_tools_are_offered_from_the_next_call_within_the_allowlist(activated_session):
    first, second, third = activated_session.exchanges.order_by("turn")
    assert first.tools == ["activate_skill"]
    assert second.tools == ["activate_skill", "bash", "read_file"]  # never web_fetch
    assert third.tools == second.tools
    calls = list(ToolCall.objects.filter(session=activated_session).order_by("id"))
    assert [c.tool for c in calls] == ["activate_skill", "read_file"]
    assert calls[0].result["tools_added"] == ["bash", "read_file"]
    assert calls[1].success, calls[1].result


def test_a_session_that_activates_a_skill_replays_identically(activated_session):
    report = replay(activated_session.pk)
    assert report.identical, report.divergence and report.divergence.describe()
    assert report.steps == 3


def test_a_changed_skill_body_diverges_at_the_activation_result(activated_session, skill):
    skill.write_text(skill.read_text().replace(BODY_MARK, "Write the monthly disk report"))
    report = replay(activated_session.pk)
    assert report.divergence is not None
    assert report.divergence.what == "the result of tool activate_skill differs"
    assert "monthly" in report.divergence.diff


def test_a_tool_not_yet_offered_is_refused_in_the_same_reply(ops, skill, scripted_provider):
    """The new tools come with the next model call, not within the reply that activated."""
    set_config("ops", allowed_tools=["activate_skill", "read_file"])
    skill.write_text(skill.read_text().replace("- bash — for the checks", "- read_file"))
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "tool_calls": [
                        {"name": "activate_skill", "arguments": {"name": "disk-report"}},
                        {"name": "read_file", "arguments": {"path": "config.yaml"}},
                    ]
                },
            },
            {"when": {"last": "tool"}, "reply": {"content": "done"}},
        ]
    )
    outcome = run_team_session(ops, "go", only_tools=["activate_skill"])
    assert outcome.ok
    calls = list(ToolCall.objects.filter(session_id=outcome.session_id).order_by("id"))
    assert calls[1].tool == "read_file" and calls[1].result["code"] == "TOOL_NOT_ALLOWED"
    assert paths.team_dir("ops").is_dir()

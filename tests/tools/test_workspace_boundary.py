"""The workspace boundary and write governance, through call_tool as a session calls the file
tools: every escape is refused with PATH_OUTSIDE_BOUNDARY (or GOVERNANCE_BLOCKED naming the
class) and nothing outside the workspace is read, written or listed."""

from __future__ import annotations

import os

import pytest

from openhive.core import paths
from openhive.engine.models import ToolCall

from .conftest import make_team

pytestmark = pytest.mark.django_db

SENTINEL = "outside-the-workspace-sentinel"


@pytest.fixture
def outside(openhive_dirs):
    """A file next to the workspaces (data dir) that no team may read."""
    target = openhive_dirs / "data" / "private.txt"
    target.write_text(SENTINEL)
    return target


def escape_paths(outside) -> list[str]:
    data = str(outside.parent)
    return [
        "../../../../../../etc/passwd",
        "../../../data/private.txt",
        "skills/../../../../data/private.txt",
        str(outside),
        "/etc/passwd",
        "~/.bashrc",
        f"{data}/openhive.sqlite3",
        "..",
        "../main/config.yaml",
        "skills/\x00/etc/passwd",
        "a" * 300,
        "x/" * 2100,
    ]


def test_read_file_refuses_every_escape_path(call, outside):
    for path in escape_paths(outside):
        result = call("read_file", path=path)
        assert result["success"] is False, path
        assert result["code"] in ("PATH_OUTSIDE_BOUNDARY",), (path, result)
        assert SENTINEL not in str(result)


def test_write_file_refuses_every_escape_path_and_writes_nothing(call, outside, openhive_dirs):
    before = {p: p.stat().st_mtime for p in openhive_dirs.rglob("*") if p.is_file()}
    for path in escape_paths(outside):
        result = call("write_file", path=path, content="pwned")
        assert result["success"] is False, path
        assert result["code"] in ("PATH_OUTSIDE_BOUNDARY", "GOVERNANCE_BLOCKED"), (path, result)
    assert outside.read_text() == SENTINEL
    after = {p: p.stat().st_mtime for p in openhive_dirs.rglob("*") if p.is_file()}
    assert {p: m for p, m in after.items() if "data/openhive" not in str(p)} == {
        p: m for p, m in before.items() if "data/openhive" not in str(p)
    }


def test_symlink_pointing_out_is_refused_for_read_write_and_edit(call, workspace, outside):
    (workspace / "escape").symlink_to(outside)
    (workspace / "escape-dir").symlink_to(outside.parent)
    for tool, extra in (
        ("read_file", {}),
        ("write_file", {"content": "pwned"}),
        ("edit_file", {"old_string": SENTINEL, "new_string": "pwned"}),
    ):
        for path in ("escape", "escape-dir/private.txt", "escape-dir/new.txt"):
            result = call(tool, path=path, **extra)
            assert result["code"] == "PATH_OUTSIDE_BOUNDARY", (tool, path, result)
    assert outside.read_text() == SENTINEL
    assert not (outside.parent / "new.txt").exists()


def test_dangling_symlink_to_a_new_outside_file_is_refused(call, workspace, openhive_dirs):
    target = openhive_dirs / "data" / "created-by-team.txt"
    (workspace / "plant").symlink_to(target)
    result = call("write_file", path="plant", content="x")
    assert result["code"] == "PATH_OUTSIDE_BOUNDARY"
    assert not target.exists()


def test_symlink_inside_the_workspace_is_followed(call, workspace):
    (workspace / "notes.md").write_text("inside\n")
    (workspace / "alias.md").symlink_to(workspace / "notes.md")
    result = call("read_file", path="alias.md")
    assert result["success"] and "inside" in result["content"]


def test_device_files_and_fifos_are_refused(call, workspace):
    os.mkfifo(workspace / "pipe")
    (workspace / "null").symlink_to("/dev/null")
    assert call("read_file", path="pipe")["code"] == "PATH_OUTSIDE_BOUNDARY"
    assert call("read_file", path="null")["code"] == "PATH_OUTSIDE_BOUNDARY"
    assert call("write_file", path="pipe", content="x")["code"] == "PATH_OUTSIDE_BOUNDARY"
    assert call("read_file", path="/dev/zero")["code"] == "PATH_OUTSIDE_BOUNDARY"


def test_glob_and_grep_never_list_or_search_outside(call, workspace, outside):
    (workspace / "escape-dir").symlink_to(outside.parent)
    (workspace / "escape").symlink_to(outside)
    (workspace / "mine.txt").write_text(f"mine {SENTINEL[:7]}\n")
    listed = call("glob", pattern="**/*")
    assert listed["success"] and sorted(listed["files"]) == ["config.yaml", "mine.txt"]
    found = call("grep", pattern="sentinel")
    assert found["success"] and SENTINEL not in found["output"]
    assert call("glob", pattern="../*")["code"] == "PATH_OUTSIDE_BOUNDARY"
    assert call("glob", pattern="/etc/*")["code"] == "PATH_OUTSIDE_BOUNDARY"
    assert call("glob", pattern="*", path="..")["code"] == "PATH_OUTSIDE_BOUNDARY"
    assert call("grep", pattern="root", path="/etc")["code"] == "PATH_OUTSIDE_BOUNDARY"
    assert call("grep", pattern="x", glob="../**")["code"] == "PATH_OUTSIDE_BOUNDARY"


# --- governance ------------------------------------------------------------------------------


def test_team_may_write_its_skills_subagents_rules_and_work_files(call, workspace):
    for path in (
        "skills/report/SKILL.md",
        "subagents/writer.md",
        "team-rules/style.md",
        "org-rules/children.md",
        "plugins/tool.py",
        "reports/2026/today.md",
    ):
        result = call("write_file", path=path, content="ok\n")
        assert result["success"], (path, result)
        assert (workspace / path).read_text() == "ok\n"


def test_own_config_is_governance_blocked(call, workspace):
    before = (workspace / "config.yaml").read_text()
    result = call("write_file", path="config.yaml", content="allowed_tools: ['*']\n")
    assert result["code"] == "GOVERNANCE_BLOCKED" and "own-config" in result["error"]
    edit = call("edit_file", path="./config.yaml", old_string="ops", new_string="root")
    assert edit["code"] == "GOVERNANCE_BLOCKED"
    (workspace / "cfg-link").symlink_to(workspace / "config.yaml")
    linked = call("write_file", path="cfg-link", content="x")
    assert linked["code"] == "GOVERNANCE_BLOCKED" and "own-config" in linked["error"]
    assert (workspace / "config.yaml").read_text() == before
    assert call("read_file", path="config.yaml")["success"]  # reading it is fine


def test_protected_places_outside_name_their_class(call, main_team, ops, settings):
    child = make_team("ops-child", ops)
    make_team("sibling", main_team)
    admin_rules = paths.admin_rules_dir()
    admin_rules.mkdir(parents=True, exist_ok=True)
    cases = {
        "system-rules": str(paths.system_rules_dir() / "00-organisation.md"),
        "admin-org-rules": str(admin_rules / "policy.md"),
        "inherited-org-rules": str(paths.team_dir("main") / "org-rules" / "x.md"),
        "other-team": str(paths.team_dir("sibling") / "notes.md"),
    }
    for governed, path in cases.items():
        result = call("write_file", path=path, content="pwned")
        assert result["code"] == "GOVERNANCE_BLOCKED", (governed, result)
        assert governed in result["error"]
    child_result = call("write_file", path=str(paths.team_dir("ops-child") / "x.md"), content="x")
    assert child_result["code"] == "GOVERNANCE_BLOCKED" and "other-team" in child_result["error"]
    assert not (paths.team_dir("sibling") / "notes.md").exists()
    assert not (admin_rules / "policy.md").exists()
    # The child's own view: its parent's org-rules are inherited, not writable.
    result = call("write_file", team=child, path="../ops/org-rules/x.md", content="x")
    assert result["code"] == "GOVERNANCE_BLOCKED" and "inherited-org-rules" in result["error"]


def test_refused_calls_are_audited_like_any_call(call, outside):
    call("read_file", path=str(outside))
    row = ToolCall.objects.get(tool="read_file")
    assert row.success is False and row.team_name == "ops"
    assert row.result["code"] == "PATH_OUTSIDE_BOUNDARY"

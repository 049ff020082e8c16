"""What the file tools do for a team inside its workspace: read with line numbers, write and
edit whole files (with secrets replaced), glob newest first, grep without any binary."""

from __future__ import annotations

import os
import time

import pytest

from openhive.core import scrubbing
from openhive.engine.models import ToolCall
from vault.services import vault_store_secret

pytestmark = pytest.mark.django_db

SECRET = "tok-Qw8Zr51LmPa0"


def test_write_then_read_with_line_numbers_and_paging(call, workspace):
    content = "".join(f"line {n}\n" for n in range(1, 11))
    written = call("write_file", path="notes/today.md", content=content)
    assert written["success"] and written["created"] is True
    assert written["path"] == "notes/today.md" and written["bytes"] == len(content)
    assert (workspace / "notes" / "today.md").read_text() == content

    page = call("read_file", path="notes/today.md", offset=3, limit=2)
    assert page["content"] == "     3\tline 3\n     4\tline 4"
    assert page["total_lines"] == 10 and page["next_offset"] == 5
    whole = call("read_file", path=str(workspace / "notes" / "today.md"))
    assert "next_offset" not in whole and whole["last_line"] == 10

    again = call("write_file", path="notes/today.md", content="short\n")
    assert again["created"] is False
    assert (workspace / "notes" / "today.md").read_text() == "short\n"


def test_read_refuses_binary_files_and_says_how_to_inspect_them(call, workspace):
    (workspace / "blob.bin").write_bytes(b"\x89PNG\x00\x00data")
    result = call("read_file", path="blob.bin")
    assert result["code"] == "BINARY_FILE" and "bash" in result["error"]


def test_read_of_a_missing_file_is_a_clear_error(call):
    result = call("read_file", path="nope.md")
    assert result["success"] is False and result["code"] == "NOT_FOUND"


def test_edit_replaces_a_unique_exact_match(call, workspace):
    (workspace / "a.txt").write_text("alpha\nbeta\nalpha\n")
    missing = call("edit_file", path="a.txt", old_string="gamma", new_string="x")
    assert missing["code"] == "NO_MATCH" and "exactly" in missing["error"]
    ambiguous = call("edit_file", path="a.txt", old_string="alpha", new_string="x")
    assert ambiguous["code"] == "AMBIGUOUS_MATCH" and "2 times" in ambiguous["error"]
    assert (workspace / "a.txt").read_text() == "alpha\nbeta\nalpha\n"
    one = call("edit_file", path="a.txt", old_string="beta", new_string="BETA")
    assert one["replacements"] == 1
    every = call("edit_file", path="a.txt", old_string="alpha", new_string="A", replace_all=True)
    assert every["replacements"] == 2
    assert (workspace / "a.txt").read_text() == "A\nBETA\nA\n"


@pytest.mark.usefixtures("vault_key")
def test_secret_values_never_land_in_a_file(call, ops, workspace):
    vault_store_secret(team=ops, key="api_token", value=SECRET, updated_by="test")
    scrubbing.invalidate()
    written = call("write_file", path="cfg.env", content=f"TOKEN={SECRET}\napi_key = x\n")
    assert written["success"] and written["redacted_secrets"] == 1
    text = (workspace / "cfg.env").read_text()
    assert SECRET not in text and text == "TOKEN=[REDACTED]\napi_key = x\n"
    edited = call("edit_file", path="cfg.env", old_string="api_key = x", new_string=SECRET)
    assert edited["success"] and SECRET not in (workspace / "cfg.env").read_text()
    # ... nor in the audit of the calls that carried it.
    assert SECRET not in str(list(ToolCall.objects.values_list("arguments", "result")))


def test_glob_lists_files_only_newest_first(call, workspace):
    for index, name in enumerate(["old.md", "skills/mid.md", "reports/new.md", "x.txt"]):
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
        os.utime(path, (time.time() - 100 + index, time.time() - 100 + index))
    (workspace / ".hidden.md").write_text("h")
    result = call("glob", pattern="**/*.md")
    assert result["files"] == ["reports/new.md", "skills/mid.md", "old.md"]
    assert call("glob", pattern="*.{md,txt}")["files"] == ["x.txt", "old.md"]
    assert call("glob", pattern="*.md", path="skills")["files"] == ["skills/mid.md"]
    assert call("glob", pattern="*.py")["message"] == "No files matched the pattern."


def test_grep_searches_text_files_with_path_and_line(call, workspace):
    (workspace / "a.md").write_text("one\nTwo errors\nthree\n")
    (workspace / "logs").mkdir()
    (workspace / "logs" / "b.log").write_text("error: disk\nok\n")
    (workspace / "bin.dat").write_bytes(b"error\x00binary")
    result = call("grep", pattern="error", ignore_case=True)
    assert result["output"].splitlines() == ["a.md:2: Two errors", "logs/b.log:1: error: disk"]
    only_logs = call("grep", pattern="error", glob="**/*.log")
    assert only_logs["count"] == 1
    one_file = call("grep", pattern="o", path="a.md")
    assert one_file["count"] == 2
    capped = call("grep", pattern=".", max_results=2)
    assert capped["count"] == 2 and capped["truncated"] is True
    assert call("grep", pattern="(")["code"] == "INVALID_PATTERN"
    assert call("grep", pattern="nothing-like-this")["message"] == "No matches found."


def test_grep_stops_a_catastrophic_pattern(call, workspace, monkeypatch):
    from openhive.tools import filesearch

    monkeypatch.setattr(filesearch, "GREP_SECONDS", 0.5)
    (workspace / "a.txt").write_text("a" * 40 + "!\n")
    started = time.monotonic()
    result = call("grep", pattern="(a|aa)+$")
    assert time.monotonic() - started < 5
    assert result["success"] and result.get("truncated") is True

"""`bash` in the bubblewrap sandbox, through call_tool as a session calls it: escape attempts
(the data dir and database file, writing outside, the network, a fork bomb, the environment's
secrets) all fail, and without bubblewrap nothing runs unless the operator opted in."""

from __future__ import annotations

import os
import shutil

import pytest
from django.db import connection

from openhive.core import paths, sandbox, scrubbing
from vault.services import vault_store_secret

from .loopback import LoopbackServer

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)"
    ),
]


def test_runs_in_the_workspace_and_writes_there(call, workspace):
    result = call("bash", command="pwd; echo made > out.txt; mkdir -p d && echo ok > d/f; ls")
    assert result["success"], result
    assert result["exit_code"] == 0 and result["sandboxed"] is True
    assert result["stdout"].splitlines()[0] == str(workspace)
    assert (workspace / "out.txt").read_text() == "made\n"
    assert (workspace / "d" / "f").read_text() == "ok\n"
    assert call("read_file", path="out.txt")["content"].endswith("made")


def test_a_failing_command_reports_its_status_and_output(call):
    result = call("bash", command="echo partial; echo oops >&2; exit 3")
    assert result["success"] is False and result["exit_code"] == 3
    assert result["stdout"] == "partial\n" and result["stderr"] == "oops\n"
    assert "status 3" in result["error"]


def test_the_data_dir_database_and_other_teams_are_not_there(call, openhive_dirs, main_team):
    data = paths.data_dir()
    (data / "private.txt").write_text("data-dir-secret")
    db_file = str(connection.settings_dict["NAME"])
    other = paths.team_dir("main")
    (other / "notes.md").write_text("main-team-notes")
    for target in (data / "private.txt", db_file, other / "notes.md", "/etc/shadow"):
        result = call("bash", command=f"cat {target}")
        assert result["exit_code"] != 0, (target, result)
        assert "secret" not in result["stdout"] and "notes" not in result["stdout"]
    listing = call("bash", command=f"ls {data} {paths.teams_dir()} 2>&1; ls /")
    assert "private.txt" not in listing["stdout"] and "main" not in listing["stdout"].split()


def test_nothing_outside_the_workspace_is_writable(call, workspace, openhive_dirs):
    outside = openhive_dirs / "data" / "planted.txt"
    for command in (
        f"echo x > {outside}",
        "echo x > /usr/planted",
        "echo x > /etc/planted",
        "echo 'allowed_tools: [\"*\"]' > config.yaml",
        "rm -f config.yaml",
        "mv config.yaml gone.yaml",
    ):
        result = call("bash", command=command)
        assert result["exit_code"] != 0, (command, result)
    # (Under pytest the workspace lives in /tmp, so `..` is the sandbox's private /tmp: it may
    # be writable there, but nothing reaches the host.)
    call("bash", command="touch ../planted ../../planted")
    assert not outside.exists() and not (workspace.parent / "planted").exists()
    assert not (workspace.parent.parent / "planted").exists()
    assert "allowed_tools" in (workspace / "config.yaml").read_text()
    assert "'*'" not in (workspace / "config.yaml").read_text().split("allowed_tools")[0]


def test_no_network_not_even_loopback(call):
    server = LoopbackServer()
    try:
        script = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {server.port}), timeout=2)\n"
        )
        result = call("bash", command=f'python3 -c "{script}"')
        assert result["exit_code"] != 0
        assert "Error" in result["stderr"]
        assert server.hits == []
        dns = call("bash", command="getent hosts example.com || echo no-dns")
        assert "no-dns" in dns["stdout"]
    finally:
        server.close()


def test_a_fork_bomb_is_contained(call):
    result = call("bash", command=":(){ :|:& };: ; sleep 1; echo survived", timeout_seconds=20)
    # It ends on its own once the process cap stops its forks, or -- on a loaded machine
    # (CI runs both databases' suites side by side) -- at its timeout: either way with the
    # whole sandbox killed at once, not left running past it.
    assert result["duration_ms"] < 22_000, result
    if result["duration_ms"] >= 20_000:
        assert result["code"] == "TIMEOUT", result
    follow_up = call("bash", command="echo still-fine")
    assert follow_up["stdout"] == "still-fine\n"


@pytest.mark.usefixtures("vault_key")
def test_the_environment_holds_no_secrets(call, ops, monkeypatch):
    monkeypatch.setenv("OPENHIVE_VAULT_KEY", "worker-env-secret-0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "worker-env-secret-0002")
    result = call("bash", command="env; cat /proc/1/environ | tr '\\0' '\\n'")
    assert "worker-env-secret" not in result["stdout"]
    names = {line.split("=", 1)[0] for line in result["stdout"].splitlines() if "=" in line}
    assert names <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "TERM",
        "PWD",
        "SHLVL",
        "_",
        "OLDPWD",
    }
    vault_store_secret(team=ops, key="api_token", value="vault-secret-Zz9911", updated_by="t")
    scrubbing.invalidate()
    refused = call("bash", command="echo vault-secret-Zz9911 > leak.txt")
    assert refused["code"] == "SECRET_DETECTED"
    assert not (paths.team_dir("ops") / "leak.txt").exists()


def test_timeout_and_output_cap(call):
    slow = call("bash", command="echo started; sleep 30", timeout_seconds=1)
    assert slow["success"] is False and slow["code"] == "TIMEOUT"
    assert slow["stdout"] == "started\n" and slow["duration_ms"] < 5000
    loud = call("bash", command="head -c 300000 /dev/zero | tr '\\0' 'x'")
    assert loud["truncated"] is True and len(loud["stdout"]) == 100_000
    assert call("bash", command="true", timeout_seconds=601)["code"] == "INVALID_ARGUMENTS"


def test_without_bubblewrap_nothing_runs_unless_the_operator_opts_in(
    call, workspace, monkeypatch, settings
):
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    refused = call("bash", command="touch ran.txt")
    assert refused["success"] is False and refused["code"] == "SANDBOX_UNAVAILABLE"
    assert "bubblewrap" in refused["error"]
    assert not (workspace / "ran.txt").exists()

    settings.OPENHIVE = {**settings.OPENHIVE, "ALLOW_UNSANDBOXED": True}
    monkeypatch.setenv("WORKER_ONLY_SECRET", "not-for-commands")
    ran = call("bash", command="touch ran.txt; env")
    assert ran["success"] and ran["sandboxed"] is False
    assert (workspace / "ran.txt").exists() and "not-for-commands" not in ran["stdout"]


def test_a_sandbox_that_cannot_start_says_so(call, monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
    result = call("bash", command="true")
    assert result["code"] == "SANDBOX_UNAVAILABLE" and "namespace" in result["error"]


def test_runner_passes_stdin_and_keeps_streams_apart(workspace):
    result = sandbox.run(
        ["/bin/sh", "-c", "cat; echo err >&2"],
        workspace=workspace,
        timeout=10,
        stdin=b'{"x": 1}' * 20000,
    )
    assert result.ok and result.stdout.startswith('{"x": 1}') and result.stderr == "err\n"
    assert len(result.stdout) == 100_000 and result.truncated
    assert os.path.isdir(workspace)

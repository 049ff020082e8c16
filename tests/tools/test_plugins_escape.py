"""A plugin that tries to escape at run time is contained by the sandbox, not by the scan.
Some attempts pass the scan as written (paths computed at run time); for the others the scan
is switched off here, as if an author had fooled it: the sandbox must hold on its own."""

from __future__ import annotations

import os

import pytest
from django.db import connection

from openhive.core import paths, scrubbing
from openhive.tools.plugins import services
from vault.services import vault_store_secret

from .loopback import LoopbackServer
from .plugin_helpers import call_as, needs_bwrap, plugin, register

pytestmark = [pytest.mark.django_db, needs_bwrap]

ANY_PATH = '{"type": "object", "properties": {"targets": {"type": "array"}}}'


@pytest.fixture
def fooled_scan(monkeypatch):
    """The static scan sees nothing wrong (as if fooled); only the sandbox is left."""
    monkeypatch.setattr(services, "scan_source", lambda source: [])


@pytest.fixture
def short_timeout(settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "PLUGIN_TIMEOUT_SECONDS": 2}


WRITER = plugin(
    """
    outcomes = {}
    for target in args["targets"]:
        try:
            with open(target, "w") as handle:
                handle.write("planted")
            outcomes[target] = "written"
        except OSError as exc:
            outcomes[target] = type(exc).__name__
    return outcomes
    """,
    parameters=ANY_PATH,
)


def test_writes_outside_the_workspace_fail_and_inside_succeed(ops, main_team, openhive_dirs):
    assert register(ops, "writer", WRITER)["success"]
    workspace = paths.team_dir("ops")
    config_before = (workspace / "config.yaml").read_text()
    outside = [
        str(openhive_dirs / "data" / "planted.txt"),
        str(paths.team_dir("main") / "planted.txt"),
        "/etc/planted",
        "/usr/planted",
        str(workspace / "config.yaml"),
        str(workspace / "plugins" / "writer.py"),  # its own code: read-only in the sandbox
        str(workspace / "plugins" / "other.py"),
    ]
    result = call_as(ops, "plugin__writer", targets=[*outside, "notes/../inside.txt"])
    assert result["success"], result
    assert result["result"]["notes/../inside.txt"] in ("written", "FileNotFoundError")
    assert all(result["result"][t] != "written" for t in outside), result["result"]
    assert not (openhive_dirs / "data" / "planted.txt").exists()
    assert not (paths.team_dir("main") / "planted.txt").exists()
    assert (workspace / "config.yaml").read_text() == config_before
    assert not (workspace / "plugins" / "other.py").exists()
    assert call_as(ops, "plugin__writer", targets=["inside.txt"])["result"] == {
        "inside.txt": "written"
    }
    assert (workspace / "inside.txt").read_text() == "planted"
    # Its own file is untouched, so it still verifies.
    assert call_as(ops, "plugin__writer", targets=[])["success"]


def test_the_data_dir_and_database_are_not_there(ops, openhive_dirs):
    (openhive_dirs / "data" / "private.txt").write_text("data-dir-secret")
    reader = plugin(
        """
        found = {}
        for target in args["targets"]:
            try:
                found[target] = open(target, "rb").read(40).decode("utf-8", "replace")
            except OSError as exc:
                found[target] = type(exc).__name__
        return found
        """,
        parameters=ANY_PATH,
    )
    assert register(ops, "reader", reader)["success"]
    targets = [str(openhive_dirs / "data" / "private.txt"), "/etc/shadow"]
    if connection.vendor == "sqlite":
        targets.append(str(connection.settings_dict["NAME"]))
    result = call_as(ops, "plugin__reader", targets=targets)
    assert result["success"], result
    assert set(result["result"].values()) <= {"FileNotFoundError", "PermissionError"}, result


def test_no_network_not_even_loopback(ops, fooled_scan):
    server = LoopbackServer()
    try:
        source = plugin(
            f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {server.port}), timeout=2)
                return "connected"
            except OSError as exc:
                return type(exc).__name__ + ": " + str(exc)
            """
        )
        assert register(ops, "netcat", source)["success"]
        result = call_as(ops, "plugin__netcat")
        assert result["success"] and result["result"] != "connected", result
        assert server.hits == []
    finally:
        server.close()


@pytest.mark.usefixtures("vault_key")
def test_the_environment_holds_no_secrets(ops, fooled_scan, monkeypatch):
    monkeypatch.setenv("OPENHIVE_VAULT_KEY", "worker-env-secret-0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "worker-env-secret-0002")
    vault_store_secret(team=ops, key="api_token", value="vault-secret-Zz9911", updated_by="t")
    scrubbing.invalidate()
    source = plugin(
        """
        import os
        parent = open("/proc/1/environ", "rb").read().decode("utf-8", "replace")
        return {"env": dict(os.environ), "parent": parent}
        """
    )
    assert register(ops, "envdump", source)["success"]
    result = call_as(ops, "plugin__envdump")
    assert result["success"], result
    text = str(result)
    assert "worker-env-secret" not in text and "vault-secret-Zz9911" not in text
    assert set(result["result"]["env"]) <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "TERM",
        "PWD",
        "LC_CTYPE",
    }
    # A secret handed over as an argument is refused before anything runs.
    writer = plugin("return len(args)", parameters=ANY_PATH)
    assert register(ops, "taker", writer)["success"]
    refused = call_as(ops, "plugin__taker", targets=["vault-secret-Zz9911"])
    assert refused["success"] is False and refused["code"] == "SECRET_DETECTED"


def test_an_infinite_loop_is_stopped_by_the_timeout(ops, short_timeout):
    assert register(ops, "spin", plugin("while True:\n    pass"))["success"]
    result = call_as(ops, "plugin__spin")
    assert result["success"] is False and result["code"] == "TIMEOUT", result
    assert result["duration_ms"] < 10_000 and result["code_sha256"]


def test_a_fork_bomb_is_contained(ops, fooled_scan, short_timeout):
    source = plugin(
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """
    )
    assert register(ops, "bomb", source)["success"]
    result = call_as(ops, "plugin__bomb")
    assert result["success"] is False and result["code"] in ("TIMEOUT", "PLUGIN_CRASHED")
    assert result["duration_ms"] < 15_000
    follow_up = plugin("return 'still fine'")
    assert register(ops, "after", follow_up)["success"]
    assert call_as(ops, "plugin__after")["result"] == "still fine"


def test_a_plugin_cannot_reach_the_worker(ops, fooled_scan):
    """The worker's process is not the plugin's: its pid, its memory and its modules are
    out of reach; the plugin sees a fresh PID namespace."""
    source = plugin(
        """
        import os, sys
        return {"pid": os.getpid(), "django": "django" in sys.modules,
                "procs": sorted(p for p in os.listdir("/proc") if p.isdigit())}
        """
    )
    assert register(ops, "whoami", source)["success"]
    result = call_as(ops, "plugin__whoami")["result"]
    assert result["django"] is False and result["pid"] != os.getpid()
    assert len(result["procs"]) <= 3  # bubblewrap's init and the plugin itself


def test_a_memory_hog_hits_its_limit_and_the_worker_is_untouched(ops, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "SANDBOX_MEMORY_MB": 256}
    source = plugin("hog = bytearray(1024 * 1024 * 1024)\nreturn len(hog)")
    assert register(ops, "hog", source)["success"]
    result = call_as(ops, "plugin__hog")
    assert result["success"] is False, result
    assert result["code"] in ("PLUGIN_ERROR", "PLUGIN_CRASHED")
    assert "MemoryError" in result["error"] or "killed" in result["error"]

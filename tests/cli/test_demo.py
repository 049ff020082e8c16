"""`manage.py openhive demo`: the offline walkthrough end to end, as an operator runs it, and
again on the same data dir (where the ops team exists already, and the chat says so instead
of waiting for a bootstrap that never comes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.e2e.conftest import ROOT, database_url  # noqa: F401  (a fixture)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_demo_runs_end_to_end_and_again_on_the_same_data_dir(
    tmp_path: Path,
    database_url: str | None,  # noqa: F811
):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "OPENHIVE_"))}
    env["OPENHIVE_DATA_DIR"] = str(tmp_path / "data")
    if database_url:
        env["DATABASE_URL"] = database_url
    port = _free_port()

    def demo() -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", "openhive", "demo", "--port", str(port), "--wait", "90"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    first = demo()
    assert "you: spawn a team called ops" in first
    assert "tool spawn_team: ok" in first
    assert "[ops] Team bootstrapped and ready." in first
    assert "tool delegate_task: ok" in first
    assert "[ops] All build servers are below 70% disk usage" in first
    assert first.rstrip().endswith(
        "Demo finished. Run `manage.py openhive serve` to keep the server running."
    )

    second = demo()
    assert "tool spawn_team: failed" in second
    assert "The ops team exists already" in second
    assert "being set up" not in second  # no success claimed after a failed tool
    assert "[ops] All build servers are below 70% disk usage" in second
    # The server was stopped cleanly both times: its port is free again.
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


@pytest.mark.django_db
def test_demo_refuses_to_send_its_messages_to_a_real_model(openhive_dirs):
    providers = openhive_dirs / "data" / "config" / "providers.yaml"
    providers.write_text(yaml.safe_dump({"profiles": {"default": {"model": "openai/gpt-x"}}}))
    with pytest.raises(CommandError, match=r"OPENHIVE_DATA_DIR=\./demo-data"):
        call_command("openhive", "demo", "--port", str(_free_port()))

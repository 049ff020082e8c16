"""`manage.py openhive` as a separate process, the way an operator runs it: `tool` offers a team
exactly the tools its sessions get (an explicit --operator bypasses that and says so), and text
no database stores is refused with a clear error before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import ROOT, database_url  # noqa: F401  (a fixture)


@pytest.fixture
def cli(tmp_path: Path, database_url: str | None):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "OPENHIVE_"))}
    env["OPENHIVE_DATA_DIR"] = str(tmp_path / "data")
    if database_url:
        env["DATABASE_URL"] = database_url

    def run(*args: str | bytes) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", "openhive", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=120,
        )

    assert run("init", "--no-user").returncode == 0
    assert run("spawn", "ops", "--scope", "disks").returncode == 0
    config = tmp_path / "data" / "run" / "teams" / "ops" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["allowed_tools"] = ["memory_*"]
    config.write_text(yaml.safe_dump(data))
    return run


def test_tool_offers_the_teams_allowlist_and_bad_text_is_refused(cli):
    refused = cli("tool", "ops", "vault_set", '{"key": "cursor", "value": "1"}')
    assert refused.returncode == 1
    result = json.loads(refused.stdout)
    assert result["code"] == "TOOL_NOT_ALLOWED"
    assert "memory_save" in result["error"] and "--operator" in result["error"]
    assert "vault_set" not in result["error"].split("offer:")[1]

    allowed = cli("tool", "ops", "memory_save", '{"key": "k", "content": "disks are fine"}')
    assert allowed.returncode == 0 and json.loads(allowed.stdout)["success"] is True

    forced = cli("tool", "ops", "vault_set", '{"key": "cursor", "value": "1"}', "--operator")
    assert forced.returncode == 0 and json.loads(forced.stdout)["success"] is True
    assert b"Operator override: the allowlist of ops is bypassed" in forced.stderr

    # Text no database stores is refused with a clear error (one process start-up serves both
    # checks: each costs seconds).
    nul = cli("tool", "ops", "memory_save", '{"key": "k\\u0000", "content": "c"}')
    assert nul.returncode == 1
    assert json.loads(nul.stdout)["code"] == "INVALID_ARGUMENTS"
    assert "NUL character" in json.loads(nul.stdout)["error"]

    # Bytes the shell cannot decode arrive as lone surrogates.
    undecodable = cli("delegate", "ops", b"check the \xff disks")
    assert undecodable.returncode != 0
    assert b"unpaired surrogate" in undecodable.stderr
    assert b"Traceback" not in undecodable.stderr
    status = cli("status")
    assert b"ops [active, bootstrapping] pending 1," in status.stdout  # only the bootstrap

"""The in-process benchmarks still run: each is started as a user starts it, at its smallest
size, and must print its figures. Nothing here is timed (the figures are not checked); a
benchmark that reaches into the engine breaks when the engine changes, and this says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# script: (its smallest arguments, a figure it prints, or several). The slow ones (sockets,
# start time, search at size, browser) are left to be run by hand.
SMALLEST = {
    "session_step.py": (
        ["--steps", "2,3", "--rounds", "1", "--seconds", "0"],
        (
            "once per session",
            "a task-mode floor of",
            "the loop's handover in a task",
            "a wait between two bare model calls",
        ),
    ),
    "session_replay.py": (["--steps", "2", "--rounds", "1"], "replay: "),
    "streamed_call.py": (["--calls", "5", "--rounds", "1"], "x the call not streamed"),
    "subagent_session.py": (["--steps", "2", "--rounds", "1"], "ratio "),
    "fanout_query_teams.py": (
        ["--children", "2", "--delay-ms", "10", "--runs", "1"],
        "query_teams (parallel): ",
    ),
    "plugin_call.py": (["--runs", "1"], "added by a plugin call"),
    "skills_index.py": (["--skills", "5", "--runs", "1"], "added by 5 skills"),
    "answer_to_running.py": (["--samples", "2"], "ratio resumed/fresh"),
    "mcp_call.py": (["--calls", "5"], "added by the call through the team"),
    "admin_pages.py": (["--tasks", "10"], "goal"),
    "cron_to_socket.py": (["--samples", "1"], "goal: p50"),
    "trigger_clock.py": (["--seconds", "2"], "cron lateness"),
    "reach_overhead.py": (["--requests", "5", "--runs", "1"], "added by"),
    "channel_layer.py": (["--sockets", "10", "20", "--sends", "40"], "OpenHive's"),
    "queue_depth.py": (
        ["--shallow", "50", "--deep", "100", "--runs", "2"],
        "behind a full team: ",
    ),
}


@pytest.mark.parametrize("script", sorted(SMALLEST))
def test_a_benchmark_runs_at_its_smallest_size_and_prints_its_figures(script, tmp_path):
    figures = SMALLEST[script][1]
    printed = _run_smallest(script, tmp_path)
    for figure in figures if isinstance(figures, tuple) else (figures,):
        assert figure in printed, printed[-3000:]


def test_the_session_step_benchmark_on_postgresql_prints_the_commit_floor(tmp_path):
    """The line that tells the database's share of a task's ratio from the engine's."""
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        pytest.skip("the commit floor is PostgreSQL's (SQLite's commits do not flush)")
    printed = _run_smallest("session_step.py", tmp_path)
    assert "ms waiting for the WAL flush" in printed, printed[-3000:]


def test_the_mcp_benchmark_stops_at_once_when_its_server_is_not_installed(tmp_path):
    done = _start("mcp_call.py", ["--calls", "5"], tmp_path, path="/usr/bin:/bin", timeout=60)
    assert done.returncode != 0
    assert "mcp-server-time is not on PATH" in done.stderr


def _run_smallest(script: str, tmp_path: Path) -> str:
    """Run `script` at its smallest size as a user starts it; what it printed."""
    # `uv run` puts the environment's bin (mcp-server-time) on PATH; so does this, however
    # pytest itself was started.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = _start(script, SMALLEST[script][0], tmp_path, path=path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _start(
    script: str, arguments: list[str], tmp_path: Path, *, path: str, timeout: int
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, script, *arguments],
        cwd=ROOT / "benchmarks",
        env={**os.environ, "TMPDIR": str(tmp_path), "PATH": path},
        capture_output=True,
        text=True,
        timeout=timeout,
    )

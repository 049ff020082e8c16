"""Stopping `serve` as Ctrl-C, systemd and container runtimes do: a signal to the whole process
group while a worker is in the middle of a task. Every process ends within 5 s, none is left
behind (no orphan still taking tasks, no zombie), and the running task is back in the queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import ROOT, Server

SLOW_RULE = """rules:
  - when: {team: main, last: user, matches: "^Slow work"}
    reply: {content: "done at last", delay_ms: 60000}
"""


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def _still_there(pid: int) -> bool:
    """Alive or a zombie: either way a process the stop left behind."""
    try:
        Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return True


def _task_row(server: Server, task_id: int) -> dict:
    code = (
        "import json; from tasks.models import Task; from openhive.engine.models import Session;"
        f"t = Task.objects.get(pk={task_id});"
        "print(json.dumps({'status': t.status, 'lease_owner': t.lease_owner,"
        " 'attempts': t.attempts, 'sessions': list(Session.objects.filter(task=t)"
        ".values_list('stop_reason', flat=True))}))"
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", code],
        env=server.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _wait_running(server: Server, headers: dict, task_id: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        task = httpx.get(f"{server.base_url}/api/v1/tasks/{task_id}", headers=headers).json()
        if task["status"] == "running" and task.get("sessions"):
            return
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} never started:\n{server.log()}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_group_signal_stops_every_process_and_hands_the_running_task_back(
    serve: Server, tmp_path: Path, sig: signal.Signals
) -> None:
    script = tmp_path / "data" / "scripts" / "demo.yaml"
    script.write_text(SLOW_RULE + script.read_text().split("rules:", 1)[1])
    headers = {"Authorization": f"Bearer {serve.token}"}
    queued = httpx.post(
        f"{serve.base_url}/api/v1/tasks",
        json={"team": "main", "text": "Slow work for the stop test"},
        headers=headers,
        timeout=10,
    )
    assert queued.status_code == 201, queued.text
    task_id = queued.json()["task"]["id"]
    _wait_running(serve, headers, task_id)
    family = _descendants(serve.process.pid)
    assert len(family) >= 3  # the web server, the worker, the engine

    started = time.monotonic()
    os.killpg(serve.process.pid, sig)
    serve.process.wait(timeout=30)
    took = time.monotonic() - started

    left = sorted(pid for pid in family if _still_there(pid))
    assert left == [], f"processes left after the stop: {left}\n{serve.log()}"
    assert took < 5, f"the stop took {took:.1f} s"
    row = _task_row(serve, task_id)
    assert row["status"] == "pending" and row["lease_owner"] == ""
    assert row["attempts"] == 0  # the stop was not the task's failure
    assert row["sessions"] == ["interrupted"]

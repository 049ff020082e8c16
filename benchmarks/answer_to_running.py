"""From a user's answer to the paused session running again (issue 18, ask_user).

On a throwaway database (SQLite, or DATABASE_URL's server), one idle worker runs as the real
pull loop in its own process (`manage.py openhive worker --threads 1`). Each sample queues a
task whose session calls `ask_user` (scripted provider), waits until the worker has paused it
(`waiting_for_user`), then measures, in wall time:

    POST /api/v1/tasks/{id}/answer (the real API, a token) → the resumed session's first
    model call starts in the worker (its first exchange's start: created_at - latency).

Baseline, measured in the same run with the same worker: a fresh task queued
(`task_enqueue`) → its session's first model call starts. Both include the worker's idle poll
(0.2 s by default), so the ratio says what resuming adds over starting.

    uv run --frozen python benchmarks/answer_to_running.py [--samples 15]

Goal: answer → running ≤ 1 s (p50) with one idle worker.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, throwaway_django

GOAL_SECONDS = 1.0
RULES = [
    {
        "when": {"team": "ops", "last": "user", "matches": "(?i)ask"},
        "reply": {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which disk?"}}]},
    },
    {"when": {"team": "ops", "last": "tool", "tool": "ask_user"}, "reply": {"content": "ok"}},
    {"when": {}, "reply": {"content": "plain"}},
]


def prepare(data: Path) -> str:
    """The main team, a child `ops`, the scripted provider and an operator's API token."""
    import yaml
    from django.contrib.auth import get_user_model

    from openhive.core import paths
    from teams.config import default_config, write_team_config
    from teams.models import Team
    from teams.services import team_ensure_main, team_workspace_scaffold
    from trust.services import api_token_create

    (data / "scripts" / "default.yaml").write_text(yaml.safe_dump({"rules": RULES}))
    (data / "config" / "providers.yaml").write_text(
        yaml.safe_dump({"profiles": {"default": {"model": "scripted/default.yaml"}}})
    )
    main = team_ensure_main()
    Team.objects.create(name="ops", parent=main, description="Operations", bootstrapped=True)
    team_workspace_scaffold(paths.team_dir("ops"))
    write_team_config(default_config("ops", parent="main"))
    get_user_model().objects.create_user(username="op", password="pw-op-12345", is_staff=True)
    return api_token_create(username="op")[1]


def wait_for(check, *args, timeout: float = 60.0, poll: float = 0.002, **kwargs):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check(*args, **kwargs)
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError("the worker did not get there in time")


def in_status(task_id: int, status: str) -> bool:
    from tasks.models import Task

    return Task.objects.filter(pk=task_id, status=status).exists()


def first_call_start(task_id: int, *, after_session: int = 0) -> float | None:
    """When the task's newest session (after `after_session`) started its first model call."""
    from openhive.engine.models import LlmExchange

    row = (
        LlmExchange.objects.filter(session__task_id=task_id, session_id__gt=after_session)
        .order_by("session_id", "turn")
        .values_list("created_at", "latency_ms")
        .first()
    )
    if row is None:
        return None
    created, latency_ms = row
    return (created - timedelta(milliseconds=latency_ms)).timestamp()


def measure(samples: int, token: str) -> tuple[list[float], list[float]]:
    from django.db import connections
    from django.test import Client

    from openhive.engine.models import Session
    from tasks.services import task_enqueue
    from teams.models import Team

    ops = Team.objects.get(name="ops")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="localhost")
    resumed: list[float] = []
    fresh: list[float] = []
    for _ in range(samples):
        task = task_enqueue(team=ops, text="Please ask which disk")
        wait_for(in_status, task.pk, "waiting_for_user")
        paused = (
            Session.objects.filter(task_id=task.pk).order_by("-id").values_list("id", flat=True)[0]
        )
        started = time.time()
        response = client.post(
            f"/api/v1/tasks/{task.pk}/answer", {"answer": "sdb"}, content_type="application/json"
        )
        assert response.status_code == 200, response.content
        running = wait_for(first_call_start, task.pk, after_session=paused)
        resumed.append(running - started)
        wait_for(in_status, task.pk, "done")

        started = time.time()
        plain = task_enqueue(team=ops, text="Just do it")
        running = wait_for(first_call_start, plain.pk)
        fresh.append(running - started)
        wait_for(in_status, plain.pk, "done")
        connections.close_all()
    return resumed, fresh


def start_worker() -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "openhive", "worker", "--threads", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    options = parser.parse_args()
    with throwaway_django("openhive-answer-") as (data, vendor):
        token = prepare(data)
        worker = start_worker()
        try:
            resumed, fresh = measure(options.samples + 1, token)
        except TimeoutError:
            worker.terminate()
            print(worker.communicate(timeout=20)[1].decode()[-3000:], file=sys.stderr)
            raise
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
    # The first sample pays one-off warm-ups (the worker's first claim, imports): not counted.
    resumed, fresh = resumed[1:], fresh[1:]

    def line(name: str, values: list[float]) -> str:
        ordered = sorted(values)
        p90 = ordered[max(0, int(len(ordered) * 0.9) - 1)]
        return (
            f"  {name:<38} p50 {statistics.median(values) * 1000:7.1f} ms   "
            f"p90 {p90 * 1000:7.1f} ms   max {max(values) * 1000:7.1f} ms"
        )

    load = os.getloadavg()
    print(f"answer → paused session running again ({vendor}, {len(resumed)} samples, 1 worker)")
    print(f"  goal: p50 ≤ {GOAL_SECONDS * 1000:.0f} ms")
    print(line("answer (API) → resumed first model call", resumed))
    print(line("baseline: enqueue → fresh first call", fresh))
    ratio = statistics.median(resumed) / statistics.median(fresh)
    met = "met" if statistics.median(resumed) <= GOAL_SECONDS else "NOT met"
    print(f"  ratio resumed/fresh (p50): {ratio:.2f}   goal {met}")
    print(f"  load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()

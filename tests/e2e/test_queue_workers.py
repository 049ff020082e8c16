"""Real worker processes (`manage.py openhive worker`) sharing one database: exactly-once,
per-team caps and priority order under contention, and recovery after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANAGE = [sys.executable, str(ROOT / "manage.py")]

pytestmark = pytest.mark.e2e


@dataclass
class QueueEnv:
    env: dict[str, str]
    tmp: Path
    scripts: Path

    def run(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run(
            list(args), env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def helper(self, *args: str) -> str:
        return self.run(sys.executable, "-m", "tests.e2e.queue_setup", *args)

    def report(self) -> list[dict]:
        return json.loads(self.helper("report"))

    def worker(self, name: str, *args: str) -> subprocess.Popen:
        log = (self.tmp / f"{name}.log").open("w")
        return subprocess.Popen(
            [*MANAGE, "openhive", "worker", *args],
            env=self.env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")[-4000:]


@pytest.fixture
def queue_env(tmp_path: Path, database_url: str | None) -> Iterator[QueueEnv]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "OPENHIVE_"))}
    data = tmp_path / "queue-data"  # the autouse fixture owns tmp_path/data
    env.update(OPENHIVE_DATA_DIR=str(data), PYTHONUNBUFFERED="1", OPENHIVE_LOG_LEVEL="WARNING")
    env.pop("REDIS_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    (data / "config").mkdir(parents=True)
    (data / "scripts").mkdir()
    queue_scripts = data / "scripts"
    (data / "config" / "providers.yaml").write_text(
        yaml.safe_dump({"profiles": {"default": {"model": "scripted/default.yaml"}}})
    )
    queue = QueueEnv(env, tmp_path, queue_scripts)
    queue.run(*MANAGE, "migrate", "--verbosity", "0")
    yield queue


def _script(queue: QueueEnv, delay_ms: int) -> None:
    rules = {"rules": [{"when": {}, "reply": {"content": "done", "delay_ms": delay_ms}}]}
    (queue.scripts / "default.yaml").write_text(yaml.safe_dump(rules))


def _t(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _max_concurrency(tasks: list[dict]) -> int:
    """The most tasks of `tasks` running at once, each from its session's start to its end.
    Not from the claim's `started_at`: that is read before the claiming statement sees the
    ends committed so far, and an end's `finished_at` before its commit, so on a loaded machine
    the two can cross while the database never held more than the cap running. A session
    starts after its claim committed, so after every end that claim saw."""
    events = []
    for t in tasks:
        events.append((_t(t["sessions"][0][0]), 1))
        events.append((_t(t["finished_at"]), -1))
    events.sort(key=lambda e: (e[0], e[1]))  # at equal times a finish frees the slot first
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def _wait(procs: list[subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.wait(timeout=max(1, deadline - time.monotonic()))


def test_two_worker_processes_run_1000_tasks_exactly_once_within_caps_in_priority_order(
    queue_env: QueueEnv,
):
    cap, teams, total = 2, 20, 1000
    _script(queue_env, delay_ms=5)
    queue_env.helper("populate", str(teams), str(total), str(cap))
    workers = [queue_env.worker(f"w{i}", "--threads", "4", "--exit-when-idle", "3") for i in (1, 2)]
    try:
        _wait(workers, timeout=600)
    finally:
        for w in workers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
    assert all(w.returncode == 0 for w in workers), queue_env.log("w1") + queue_env.log("w2")
    tasks = queue_env.report()
    assert len(tasks) == total
    # each task ran exactly once: one claim, one completed session, done
    assert {t["status"] for t in tasks} == {"done"}
    assert {t["attempts"] for t in tasks} == {1}
    assert all(len(t["sessions"]) == 1 and t["sessions"][0][2] == "completed" for t in tasks)
    by_team: dict[str, list[dict]] = defaultdict(list)
    for t in tasks:
        by_team[t["team"]].append(t)
    assert len(by_team) == teams
    peaks = {team: _max_concurrency(rows) for team, rows in by_team.items()}
    assert max(peaks.values()) <= cap, peaks
    assert max(peaks.values()) == cap  # the cap was actually reached, so it was tested
    for team, rows in by_team.items():
        claimed = sorted(rows, key=lambda t: (_t(t["started_at"]), t["priority"], t["id"]))
        keys = [(t["priority"], _t(t["created_at"]), t["id"]) for t in claimed]
        assert keys == sorted(keys), f"priority order broken in {team}"


def test_a_sigkilled_workers_task_reruns_after_its_lease_expires_and_never_twice_at_once(
    queue_env: QueueEnv,
):
    queue_env.env["OPENHIVE_LEASE_SECONDS"] = "2"
    # The first run's model call outlasts the kill by far: seeing its session takes a helper
    # process, seconds on a loaded machine (with 2.5 s, the run sometimes ended first).
    _script(queue_env, delay_ms=60_000)
    task_id = int(queue_env.helper("enqueue", "ops", "slow job").strip())
    first = queue_env.worker("w1", "--threads", "1")
    try:
        deadline = time.monotonic() + 60
        while True:
            rows = queue_env.report()
            if rows[0]["sessions"]:
                break
            assert time.monotonic() < deadline, queue_env.log("w1")
            assert first.poll() is None, queue_env.log("w1")
            time.sleep(0.3)
        os.killpg(first.pid, signal.SIGKILL)
        killed_at = datetime.now(tz=_t(rows[0]["started_at"]).tzinfo)
        first.wait(timeout=10)
        assert rows[0]["status"] == "running" and rows[0]["attempts"] == 1
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    _script(queue_env, delay_ms=500)  # what the second worker, a new process, reads
    second = queue_env.worker("w2", "--threads", "1", "--exit-when-idle", "4")
    try:
        second.wait(timeout=90)
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    (task,) = queue_env.report()
    assert task["id"] == task_id
    assert (task["status"], task["attempts"], task["stop_reason"]) == ("done", 2, "completed")
    killed_session, rerun = sorted(task["sessions"])
    # the killed run never finished by itself; the reaper closed it, saying why
    assert killed_session[1] is not None and killed_session[2] == "worker_died"
    assert rerun[2] == "completed"
    # the re-run started only after the first lease ran out (renewed at most ~1 s before the
    # kill, 2 s long): never two runs of the task at once
    assert (_t(task["started_at"]) - killed_at).total_seconds() >= 0.9

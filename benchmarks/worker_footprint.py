"""A worker's memory: RSS of a real `manage.py openhive worker` once it has run a task.

    uv run python benchmarks/worker_footprint.py [--runs 3] [--threads 1]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> \
        uv run python benchmarks/worker_footprint.py

In a throwaway data dir (and database), one task is queued for `main` (scripted model, one
reply), then the worker starts with `--exit-when-idle`; its VmRSS is sampled from /proc every
20 ms until it exits. Printed: RSS once the task has finished (the worker idle, as it sits
between tasks), the peak (VmHWM), the goal (issue 19: <= 200 MB), and the same-run baseline,
a bare `python -c "import django; django.setup()"` with the same settings.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
MANAGE = [sys.executable, str(ROOT / "manage.py")]
GOAL_MB = 200.0

BARE = (
    "import django; django.setup(); "
    "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS')))"
)
QUEUE_ONE = (
    "import django; django.setup(); "
    "from teams.services import team_ensure_main; from tasks.services import task_enqueue; "
    "task_enqueue(team=team_ensure_main(), text='say done', created_by='bench')"
)
DONE = (
    "import django; django.setup(); from tasks.models import Task; "
    "print(Task.objects.filter(status='done').count())"
)


def status_kb(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def python(code: str, env: dict) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def one_worker(env: dict, threads: int) -> tuple[float, float, bool]:
    """(RSS MB after the task, peak MB, task done) for one worker run on one queued task."""
    python(QUEUE_ONE, env)
    proc = subprocess.Popen(
        [*MANAGE, "openhive", "worker", "--threads", str(threads), "--exit-when-idle", "1.5"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    last = peak = 0
    while proc.poll() is None:
        rss = status_kb(proc.pid, "VmRSS")
        hwm = status_kb(proc.pid, "VmHWM")
        if rss:
            last = rss  # the last sample is the idle worker after its task, just before exit
        if hwm:
            peak = max(peak, hwm)
        time.sleep(0.02)
    done = python(DONE, env) != "0"
    return last / 1024, peak / 1024, done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="oh-footprint-"))
    data = tmp / "data"
    (data / "config").mkdir(parents=True)
    (data / "scripts").mkdir()
    (data / "scripts" / "default.yaml").write_text(
        "rules:\n  - when: {}\n    reply: {content: done}\n"
    )
    (data / "config" / "providers.yaml").write_text(
        "profiles:\n  default: {model: scripted/default.yaml}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENHIVE_")}
    env.update(
        OPENHIVE_DATA_DIR=str(data),
        OPENHIVE_RUN_DIR=str(tmp / "run"),
        OPENHIVE_LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="openhive.settings",
        PYTHONPATH=str(ROOT),
    )
    base = os.environ.get("DATABASE_URL", "")
    admin = ""
    if base.startswith(("postgres://", "postgresql://")):
        import psycopg

        parts = urlsplit(base)
        admin = urlunsplit(parts._replace(path="/postgres"))
        env["DATABASE_URL"] = urlunsplit(
            parts._replace(path=f"/openhive_bench_{uuid.uuid4().hex[:8]}")
        )
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{urlsplit(env["DATABASE_URL"]).path[1:]}"')
    try:
        subprocess.run([*MANAGE, "migrate", "--verbosity", "0"], env=env, cwd=ROOT, check=True)
        bare = [int(python(BARE, env)) / 1024 for _ in range(args.runs)]
        runs = [one_worker(env, args.threads) for _ in range(args.runs)]
    finally:
        if admin:
            import psycopg

            with psycopg.connect(admin, autocommit=True) as conn:
                name = urlsplit(env["DATABASE_URL"]).path[1:]
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(tmp, ignore_errors=True)
    assert all(done for _, _, done in runs), "the worker did not finish its task"
    idle = statistics.median(r for r, _, _ in runs)
    peak = statistics.median(p for _, p, _ in runs)
    baseline = statistics.median(bare)
    vendor = "postgresql" if admin else "sqlite"
    print(f"database: {vendor}; worker --threads {args.threads}; median of {args.runs} runs")
    print(f"worker RSS after one task: {idle:.0f} MB  (goal <= {GOAL_MB:.0f} MB: "
          f"{'met' if idle <= GOAL_MB else 'NOT met'}; {idle / GOAL_MB:.2f}x goal)")  # fmt: skip
    print(f"worker peak RSS (VmHWM):   {peak:.0f} MB")
    print(f"baseline bare django.setup(): {baseline:.0f} MB; worker = {idle / baseline:.2f}x it, "
          f"+{idle - baseline:.0f} MB")  # fmt: skip
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

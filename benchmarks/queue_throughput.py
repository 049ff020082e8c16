"""Queue throughput and start latency on PostgreSQL, beside plain django-q2 in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/anything uv run python \
        benchmarks/queue_throughput.py [--tasks 4000] [--sessions 600] [--workers 1,2,4]

A throwaway database is created on that server (and dropped at the end). Figures:
  1. queue only: tasks claimed (team lock, cap check, SKIP LOCKED) and finished per second by
     N worker processes whose task body is empty -- the cost of the queue itself;
  2. full sessions: the real `manage.py openhive worker` running a scripted-provider session
     (one model turn, no delay) per task, N processes;
  3. baseline: plain django-q2 `async_task` of an empty function with N cluster workers;
  4. enqueue -> session-start latency p50/p99 with idle workers (pull mode, 0.05 s poll).
Throughput is tasks / (last finish - first start), so process start-up is not counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
MANAGE = [sys.executable, str(ROOT / "manage.py")]


def noop() -> None:
    """The django-q2 baseline's task body."""


# --- a worker process whose task body is empty: measures the queue, not the model ------------


def noop_worker(seconds_idle: float) -> None:
    from django.db import close_old_connections

    from tasks.models import Task
    from tasks.services import task_claim_next, task_finish

    worker = f"bench:{os.getpid()}"
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < seconds_idle:
        claimed = None
        for team_id, name in (
            Task.objects.filter(status=Task.Status.PENDING)
            .order_by("priority", "created_at", "id")
            .values_list("team_id", "team__name")[:50]
        ):
            claimed = task_claim_next(
                team_id=team_id, team_name=name, worker=worker, skip_locked=True
            )
            if claimed is not None:
                break
        if claimed is None:
            time.sleep(0.02)
            continue
        task_finish(task_id=claimed.pk, worker=worker, status="done", result="ok")
        idle_since = time.monotonic()
    close_old_connections()


# --- orchestration ------------------------------------------------------------------------------


def create_database(base_url: str) -> tuple[str, str]:
    import psycopg

    parts = urlsplit(base_url)
    name = f"openhive_bench_{uuid.uuid4().hex[:8]}"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}")), admin


def drop_database(url: str, admin: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_env(db_url: str, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENHIVE_")}
    env.update(
        DATABASE_URL=db_url,
        OPENHIVE_DATA_DIR=str(data_dir),
        OPENHIVE_LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    env.pop("REDIS_URL", None)
    (data_dir / "config").mkdir(parents=True, exist_ok=True)
    (data_dir / "scripts").mkdir(exist_ok=True)
    (data_dir / "scripts" / "bench.yaml").write_text(
        "rules:\n  - when: {}\n    reply: {content: done}\n"
    )
    (data_dir / "config" / "providers.yaml").write_text(
        "profiles:\n  default: {model: scripted/bench.yaml}\n"
    )
    return env


def fill(teams: int, tasks: int) -> None:
    from openhive.org.services import team_spawn
    from tasks.models import Task
    from teams.config import load_team_config, write_team_config
    from teams.models import Team
    from teams.services import team_ensure_main

    main = team_ensure_main()
    Task.objects.all().delete()
    for i in range(teams):
        name = f"bench-{i:02d}"
        team = Team.objects.filter(name=name).first()
        if team is None:
            team = team_spawn(parent=main, name=name, scope_accepts=["bench"]).team
            config = load_team_config(name)
            config.max_concurrent_daily_ops = 100
            write_team_config(config)
            Team.objects.filter(pk=team.pk).update(bootstrapped=True)
    Task.objects.all().delete()
    ids = list(Team.objects.filter(name__startswith="bench-").values_list("pk", flat=True))
    Task.objects.bulk_create(
        [Task(team_id=ids[i % len(ids)], text=f"job {i}") for i in range(tasks)], batch_size=1000
    )


def span_rate(rows: list[tuple]) -> float:
    starts = [r[0] for r in rows]
    ends = [r[1] for r in rows]
    seconds = (max(ends) - min(starts)).total_seconds()
    return len(rows) / seconds if seconds > 0 else float("inf")


def run_processes(cmds: list[list[str]], env: dict[str, str], timeout: float) -> None:
    procs = [
        subprocess.Popen(c, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for c in cmds
    ]
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            raise SystemExit(f"worker failed: {err.decode()[-2000:]}")


def measure_ours(n: int, tasks: int, env: dict[str, str], *, sessions: bool) -> float:
    from tasks.models import Task

    fill(teams=20, tasks=tasks)
    if sessions:
        threads = "2"
        cmd = [*MANAGE, "openhive", "worker", "--threads", threads, "--exit-when-idle", "2",
               "--poll", "0.05"]  # fmt: skip
    else:
        cmd = [sys.executable, __file__, "--noop-worker"]
    run_processes([cmd] * n, env, timeout=900)
    rows = list(Task.objects.filter(status="done").values_list("started_at", "finished_at"))
    if len(rows) != tasks:
        failed = Task.objects.exclude(status="done").values_list("status", "result")[:3]
        raise SystemExit(f"only {len(rows)} of {tasks} tasks finished: {list(failed)}")
    assert not Task.objects.exclude(attempts=1).exists(), "a task ran more than once"
    return span_rate(rows)


def measure_django_q(n: int, tasks: int, env: dict[str, str]) -> float:
    from django_q.models import OrmQ, Success
    from django_q.tasks import async_task

    Success.objects.all().delete()
    OrmQ.objects.all().delete()
    for _ in range(tasks):
        async_task("benchmarks.queue_throughput.noop")
    q_env = {
        **env,
        "OPENHIVE_WORKERS": str(n),
        "DJANGO_SETTINGS_MODULE": "benchmarks.queue_settings",
    }
    proc = subprocess.Popen(
        [*MANAGE, "qcluster"], env=q_env, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 900
    try:
        while Success.objects.count() < tasks:
            if time.monotonic() > deadline:
                raise SystemExit("django-q2 baseline did not finish")
            time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return span_rate(list(Success.objects.values_list("started", "stopped")))


def measure_latency(samples: int, env: dict[str, str]) -> tuple[float, float]:
    from tasks.models import Task
    from tasks.services import task_enqueue
    from teams.models import Team

    fill(teams=1, tasks=0)
    team = Team.objects.get(name="bench-00")
    proc = subprocess.Popen(
        [*MANAGE, "openhive", "worker", "--threads", "2", "--poll", "0.05"],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        warm = task_enqueue(team=team, text="warm up")
        while Task.objects.get(pk=warm.pk).status != "done":
            time.sleep(0.1)
        latencies = []
        for i in range(samples):
            task = task_enqueue(team=team, text=f"ping {i}")
            while True:
                row = Task.objects.filter(pk=task.pk).values("status", "started_at").first()
                if row["status"] == "done":
                    break
                time.sleep(0.01)
            latencies.append((row["started_at"] - task.created_at).total_seconds() * 1000)
            time.sleep(0.13)  # arrive at a random point of the workers' poll cycle
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--sessions", type=int, default=600)
    parser.add_argument("--baseline-tasks", type=int, default=1000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--latency-samples", type=int, default=100)
    parser.add_argument("--noop-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    if args.noop_worker:
        import django

        django.setup()
        noop_worker(seconds_idle=1.5)
        return
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL=postgres://... (the benchmark is for PostgreSQL)")
    import tempfile

    db_url, admin = create_database(base)
    tmp = Path(tempfile.mkdtemp(prefix="openhive-bench-"))
    env = setup_env(db_url, tmp / "data")
    try:
        subprocess.run([*MANAGE, "migrate", "-v", "0"], env=env, cwd=ROOT, check=True)
        os.environ.update({k: env[k] for k in ("DATABASE_URL", "OPENHIVE_DATA_DIR")})
        os.environ["OPENHIVE_LOG_LEVEL"] = "WARNING"
        import django

        django.setup()
        counts = [int(w) for w in args.workers.split(",")]
        print(f"cores: {os.cpu_count()}; PostgreSQL; all figures in tasks/s")
        print(f"{'workers':>8} {'queue only':>12} {'sessions':>10} {'django-q2':>10} "
              f"{'queue/dq2':>10} {'sessions/dq2':>13}")  # fmt: skip
        for n in counts:
            queue = measure_ours(n, args.tasks, env, sessions=False)
            sessions = measure_ours(n, args.sessions, env, sessions=True)
            baseline = measure_django_q(n, args.baseline_tasks, env)
            ratios = f"{queue / baseline:>10.2f} {sessions / baseline:>13.2f}"
            print(f"{n:>8} {queue:>12.0f} {sessions:>10.1f} {baseline:>10.1f} {ratios}", flush=True)
        p50, p99 = measure_latency(args.latency_samples, env)
        print(f"enqueue -> session start (idle workers, poll 0.05 s): p50 {p50:.0f} ms, "
              f"p99 {p99:.0f} ms")  # fmt: skip
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(db_url, admin)


if __name__ == "__main__":
    main()

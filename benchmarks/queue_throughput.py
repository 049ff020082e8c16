"""Queue throughput and start latency, on PostgreSQL and SQLite, beside plain django-q2 and the
old per-task claim path in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/anything uv run python \
        benchmarks/queue_throughput.py [--tasks 4000] [--workers 1,2,4] [--sessions 0]

PostgreSQL (a throwaway database on DATABASE_URL's server, dropped at the end) with 1/2/4
worker processes, and SQLite (a throwaway file) with 1 worker process; without DATABASE_URL
only SQLite. Figures:
  1. batch: tasks claimed and finished per second by N worker processes running the real pull
     worker (`tasks.pull.PullWorker`: batched claims, task ends written together by its
     finisher, group commit) with an empty task body -- the cost of the queue itself; goal
     >= 2,000/s with 4 workers on PostgreSQL, >= 500/s with 1 worker on SQLite;
  1b. 1-end: the same pull worker, each end its own transaction (the path before group commit);
  2. old: the per-task claim path (`task_claim_next` team by team, `task_finish` re-reading);
  3. django-q2: plain `async_task` of an empty function with N cluster workers;
  4. sessions (with --sessions N): the real `manage.py openhive worker` running a scripted
     one-turn session per task;
  5. enqueue -> session start p50/p99 with idle `openhive worker`s (goal p50 <= 20 ms).
Throughput is tasks / (last finish - first start); the worker processes (but `--sessions`' real
`openhive worker`s) start claiming together once every one has set up Django and connected, so
no worker's start-up is counted, nor competes for the cores with the others' claims. Every
task is queued before the workers start, so --tasks is also the depth of the queue the claims
read: `--tasks 20000` checks that a claim does not slow down as the queue grows.
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
GOALS = {("postgresql", 4): 2000.0, ("sqlite", 1): 500.0}
LATENCY_GOAL_MS = 20.0


def noop() -> None:
    """The django-q2 baseline's task body."""


# --- worker processes whose task body is empty: they measure the queue, not the model ---------


def batch_worker(threads: int, seconds_idle: float, *, group: bool = True) -> None:
    """The real pull worker (batched claims, ends written together by its finisher) with an
    empty task body: the end goes the way `run_claimed` records it."""
    from tasks.pull import PullWorker
    from tasks.runner import record_end
    from tasks.services import task_finish

    def execute(task, owner: str) -> str:
        if group:
            record_end(task, owner, status="done", result="ok")
        else:
            task_finish(task_id=task.pk, worker=owner, status="done", result="ok", held=task)
        return "done"

    pull = PullWorker(threads=threads, execute=execute, poll=0.05)
    pull.start()
    while pull.busy or time.monotonic() - pull.last_work < seconds_idle:
        time.sleep(0.05)
    pull.stop.set()
    pull.join()


def old_worker(seconds_idle: float) -> None:
    """The per-task path as it was: a team-locked claim per task, a re-reading finish."""
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
    # Named after DATABASE_URL's own database, so runs sharing a server stay apart.
    name = f"{parts.path.lstrip('/') or 'openhive'}_bench_{uuid.uuid4().hex[:6]}"
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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENHIVE_", "DATABASE_URL"))}
    env.update(
        OPENHIVE_DATA_DIR=str(data_dir),
        OPENHIVE_RUN_DIR=str(data_dir / "run"),
        OPENHIVE_LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    if db_url:
        env["DATABASE_URL"] = db_url
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


def run_processes(
    cmds: list[list[str]], env: dict[str, str], timeout: float, *, gated: bool = False
) -> None:
    """Run the worker processes to their end. `gated`: this script's own workers, started
    together once every one of them is up (`wait_for_start`)."""
    gate = Path(tempfile.mkdtemp(prefix="openhive-gate-"))
    env = {**env, START_GATE: str(gate)} if gated else env
    procs = [
        subprocess.Popen(c, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for c in cmds
    ]
    try:
        deadline = time.monotonic() + timeout
        while gated and len(list(gate.glob("ready-*"))) < len(procs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                break  # a worker that died says why below
            time.sleep(0.01)
        (gate / "go").touch()
        for p in procs:
            _, err = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise SystemExit(f"worker failed: {err.decode()[-2000:]}")
    finally:
        shutil.rmtree(gate, ignore_errors=True)


START_GATE = "BENCH_START_GATE"


def wait_for_start() -> None:
    """In a worker process, once Django is set up and connected: say so, and wait until every
    worker of the run is. Started one by one, the first workers claimed while the others were
    importing Django on the same two cores (~1 s of CPU each), so the figure counted their
    start-up too, though it is meant to count the queue alone."""
    gate = os.environ.get(START_GATE)
    if not gate:
        return
    from django.db import connection

    connection.ensure_connection()
    Path(gate, f"ready-{os.getpid()}").touch()
    while not Path(gate, "go").exists():
        time.sleep(0.002)


def measure_ours(n: int, tasks: int, env: dict[str, str], *, mode: str, threads: int) -> float:
    from tasks.models import Task

    fill(teams=20, tasks=tasks)
    if mode == "sessions":
        cmd = [*MANAGE, "openhive", "worker", "--threads", str(threads), "--exit-when-idle", "2",
               "--poll", "0.05"]  # fmt: skip
    else:
        flag = "--batch-worker" if mode in ("batch", "single") else f"--{mode}-worker"
        cmd = [sys.executable, __file__, flag, "--threads", str(threads)]
        if mode == "single":
            cmd.append("--one-end-per-commit")
    run_processes([cmd] * n, env, timeout=900, gated=mode != "sessions")
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


def measure_latency(samples: int, env: dict[str, str], workers: int) -> tuple[float, float]:
    """Enqueue -> the task's session row, with idle `openhive worker`s (the default 0.2 s
    poll: a start faster than that comes from the wake-up, not from polling)."""
    from openhive.engine.models import Session
    from tasks.models import Task
    from tasks.services import task_enqueue
    from teams.models import Team

    fill(teams=1, tasks=0)
    team = Team.objects.get(name="bench-00")
    procs = [
        subprocess.Popen(
            [*MANAGE, "openhive", "worker", "--threads", "2"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    try:
        warm = task_enqueue(team=team, text="warm up")
        while Task.objects.get(pk=warm.pk).status != "done":
            time.sleep(0.1)
        latencies = []
        for i in range(samples):
            task = task_enqueue(team=team, text=f"ping {i}")
            while Task.objects.filter(pk=task.pk).values_list("status", flat=True)[0] != "done":
                time.sleep(0.01)
            started = Session.objects.filter(task_id=task.pk).values_list("started_at", flat=True)
            latencies.append((started[0] - task.created_at).total_seconds() * 1000)
            time.sleep(0.13)  # arrive at a random point of the workers' idle cycle
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    latencies.sort()
    return statistics.median(latencies), latencies[max(0, int(len(latencies) * 0.99) - 1)]


def run_backend(args: argparse.Namespace) -> None:
    """In a process of its own (Django binds one database per process)."""
    import django

    base = os.environ.get("DATABASE_URL", "")
    admin = db_url = ""
    if base:
        db_url, admin = create_database(base)
    tmp = Path(tempfile.mkdtemp(prefix="openhive-bench-"))
    env = setup_env(db_url, tmp / "data")
    try:
        subprocess.run([*MANAGE, "migrate", "-v", "0"], env=env, cwd=ROOT, check=True)
        os.environ.pop("DATABASE_URL", None)
        os.environ.update({k: v for k, v in env.items() if k.startswith(("OPENHIVE_", "DATA"))})
        django.setup()
        from django.db import connection

        vendor = connection.vendor
        counts = [int(w) for w in args.workers.split(",")] if db_url else [1]
        for n in counts:
            batch = measure_ours(n, args.tasks, env, mode="batch", threads=args.threads)
            single = measure_ours(n, args.tasks, env, mode="single", threads=args.threads)
            goal = GOALS.get((vendor, n))
            verdict = (
                f"{goal:>6.0f} {'met' if batch >= goal else 'MISSED':>6}" if goal else " " * 13
            )
            if args.quick:  # group commit against one end per commit only
                print(f"{vendor:>10} {n:>7} {batch:>9.0f} {verdict} {single:>7.0f} "
                      f"{'-':>7} {'-':>9} {batch / single:>9.2f}x", flush=True)  # fmt: skip
                continue
            old = measure_ours(n, args.old_tasks, env, mode="old", threads=1)
            dq2 = measure_django_q(n, args.baseline_tasks, env)
            print(f"{vendor:>10} {n:>7} {batch:>9.0f} {verdict} {single:>7.0f} {old:>7.0f} "
                  f"{dq2:>9.0f} {batch / single:>9.2f}x {batch / old:>9.1f}x "
                  f"{batch / dq2:>9.1f}x", flush=True)  # fmt: skip
            if args.sessions:
                sessions = measure_ours(n, args.sessions, env, mode="sessions", threads=2)
                print(f"{'':>10} {n:>7} sessions (scripted one-turn): {sessions:.1f} tasks/s "
                      f"= {sessions / dq2:.2f}x django-q2", flush=True)  # fmt: skip
        if args.quick:
            return
        p50, p99 = measure_latency(args.latency_samples, env, workers=1 if not db_url else 2)
        verdict = "met" if p50 <= LATENCY_GOAL_MS else "MISSED"
        print(f"{vendor:>10} enqueue -> session start (idle workers): p50 {p50:.1f} ms "
              f"(goal <= {LATENCY_GOAL_MS:.0f}: {verdict}), p99 {p99:.1f} ms")  # fmt: skip
    finally:
        from django.db import connections

        connections.close_all()
        if db_url:
            drop_database(db_url, admin)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--old-tasks", type=int, default=1000)
    parser.add_argument("--baseline-tasks", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=0)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--threads", type=int, default=8, help="runner threads per worker")
    parser.add_argument("--latency-samples", type=int, default=100)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="only batch/s against 1-end/s: no old path, no django-q2, no latency",
    )
    parser.add_argument("--backend", choices=["postgresql", "sqlite"], help=argparse.SUPPRESS)
    parser.add_argument("--batch-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--old-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one-end-per-commit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    if args.batch_worker or args.old_worker:
        import django

        django.setup()
        import tasks.pull  # what the worker runs, imported before the start
        import tasks.runner  # noqa: F401

        wait_for_start()
        if args.batch_worker:
            batch_worker(args.threads, seconds_idle=1.5, group=not args.one_end_per_commit)
        else:
            old_worker(seconds_idle=1.5)
        return
    if args.backend:
        run_backend(args)
        return
    base = os.environ.get("DATABASE_URL", "")
    load = os.getloadavg()
    print(f"cores: {os.cpu_count()}; load average {load[0]:.2f} {load[1]:.2f}; "
          "tasks/s of no-op tasks; ratios vs the same run", flush=True)  # fmt: skip
    print(f"{'database':>10} {'workers':>7} {'batch/s':>9} {'goal':>6} {'':>6} {'1-end/s':>7} "
          f"{'old/s':>7} {'django-q2':>9} {'vs 1-end':>10} {'vs old':>10} {'vs dq2':>10}",
          flush=True)  # fmt: skip
    forward = sys.argv[1:]
    for backend in (["postgresql"] if base.startswith("postgres") else []) + ["sqlite"]:
        env = dict(os.environ)
        if backend == "sqlite":
            env.pop("DATABASE_URL", None)
        subprocess.run([sys.executable, __file__, *forward, "--backend", backend], env=env,
                       check=True)  # fmt: skip
    print(f"load average at the end: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()

"""The admin's story pages against a large history: the dashboard (admin index), a task's
story, its tree with the timeline, and a session's conversation.

    uv run python benchmarks/admin_pages.py                       # SQLite, 10,000 tasks
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench uv run python benchmarks/admin_pages.py
    uv run python benchmarks/admin_pages.py --tasks 50000

Prints, per page, the p50 render time and the number of SQL queries, first with a small
history (100 tasks: the baseline, in the same run), then with the large one; and the
dashboard's reads alone (`openhive.dashboard.dashboard()`, without the template). Goal: at
10,000 tasks and sessions every page p50 within 1.5x its baseline, with the same number of
queries (the dashboard is a fixed set of aggregates; a tree costs a few queries per level).
The scrubber reloads its secret list every 2 s: a page may count one query more or less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL_RATIO = 1.5
RUNS = 15


def setup(data_dir: Path) -> str | None:
    """Django on a fresh database: a temporary SQLite file, or a new PostgreSQL database."""
    os.environ["OPENHIVE_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    created = None
    base = os.environ.get("DATABASE_URL", "")
    if base.startswith(("postgres://", "postgresql://")):
        import psycopg

        parts = urlsplit(base)
        created = f"openhive_bench_admin_{os.getpid()}"
        with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{created}"')
        os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{created}"))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    return created


def drop(created: str | None, base: str) -> None:
    if not created:
        return
    import psycopg
    from django.db import connections

    connections.close_all()
    parts = urlsplit(base)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{created}" WITH (FORCE)')


def fill(count: int, offset: int) -> None:
    """`count` finished tasks over 10 teams, one session each with 3 exchanges and a tool
    call, plus a failed one in every 20."""
    from datetime import timedelta
    from decimal import Decimal

    from django.utils import timezone

    from openhive.engine.models import LlmExchange, Session, ToolCall
    from tasks.models import Task
    from teams.models import Team
    from teams.services import team_ensure_main

    main = team_ensure_main()
    teams = [
        Team.objects.get_or_create(name=f"team-{i}", defaults={"parent": main})[0]
        for i in range(10)
    ]
    now = timezone.now()
    tasks = Task.objects.bulk_create(
        Task(
            team=teams[i % 10],
            text=f"task {offset + i}: check the disks of build server {i % 50}",
            result="all fine" if i % 20 else "",
            status="done" if i % 20 else "failed",
            started_at=now - timedelta(seconds=i),
            finished_at=now - timedelta(seconds=i) + timedelta(milliseconds=800),
            duration_ms=800,
        )
        for i in range(count)
    )
    sessions = Session.objects.bulk_create(
        Session(
            team_id=t.team_id,
            task=t,
            stop_reason="completed" if t.status == "done" else "error",
            error="" if t.status == "done" else "provider error",
            turns=3,
            prompt_tokens=300,
            completion_tokens=40,
            cost_usd=Decimal("0.0012"),
            finished_at=now,
        )
        for t in tasks
    )
    LlmExchange.objects.bulk_create(
        LlmExchange(
            session=s,
            turn=turn,
            request_digest="0" * 64,
            request_messages=[{"role": "user", "content": "check the disks"}]
            if turn == 1
            else [
                {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "tool", "tool_call_id": f"c{turn}", "content": '{"success": true}'},
            ],
            response={"content": "ok"}
            if turn == 3
            else {
                "content": None,
                "tool_calls": [
                    {"id": f"c{turn + 1}", "function": {"name": "list_teams", "arguments": "{}"}}
                ],
            },
            prompt_tokens=100,
            completion_tokens=10,
        )
        for s in sessions
        for turn in (1, 2, 3)
    )
    ToolCall.objects.bulk_create(
        ToolCall(session=s, team_id=s.team_id, team_name="x", tool="list_teams", success=True)
        for s in sessions
    )


def tree(depth: int, fan_out: int) -> int:
    """A delegated tree (every task queues `fan_out` children) whose sessions ran; the root."""
    from django.utils import timezone

    from openhive.engine.models import Session
    from tasks.models import Task
    from teams.models import Team

    team = Team.objects.get(name="team-0")
    root = Task.objects.create(team=team, text="root", status="done", started_at=timezone.now())
    level = [root]
    for _ in range(depth):
        below = []
        for parent in level:
            session = Session.objects.create(team=team, task=parent, stop_reason="completed")
            for _ in range(fan_out):
                child = Task.objects.create(
                    team=team,
                    text="child",
                    status="done",
                    options={"parent_task_id": parent.pk, "parent_session_id": session.pk},
                )
                below.append(child)
        level = below
    return root.pk


def measure(client, url: str) -> tuple[float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    queries = 0
    for _ in range(RUNS):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        queries = len(captured)
    return statistics.median(times), queries


def dashboard_reads() -> float:
    from openhive.dashboard import dashboard

    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        dashboard()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def pages(root_id: int) -> dict[str, str]:
    from django.urls import reverse

    from openhive.engine.models import Session
    from tasks.models import Task

    task = Task.objects.filter(pk=root_id).first()
    session = Session.objects.filter(exchanges__isnull=False).order_by("-id").first()
    return {
        "dashboard": reverse("admin:index"),
        "task list": reverse("admin:tasks_task_changelist"),
        "task story": reverse("admin:tasks_task_change", args=[task.pk]),
        "task tree (3 levels x 3)": reverse("admin:tasks_task_tree", args=[task.pk]),
        "session conversation": reverse("admin:engine_session_change", args=[session.pk]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    args = parser.parse_args()
    base = os.environ.get("DATABASE_URL", "")
    with tempfile.TemporaryDirectory() as tmp:
        created = setup(Path(tmp))
        try:
            from django.contrib.auth import get_user_model
            from django.db import connection
            from django.test import Client

            user = get_user_model().objects.create_superuser("bench", password="x")
            client = Client(HTTP_HOST="localhost")
            client.force_login(user)
            fill(100, 0)
            root = tree(depth=3, fan_out=3)
            print(
                f"database: {connection.vendor}; goal: p50 <= {GOAL_RATIO}x the baseline, "
                "same queries (+-1)"
            )
            baseline = {name: measure(client, url) for name, url in pages(root).items()}
            base_reads = dashboard_reads()
            fill(args.tasks - 100, 100)
            large = {name: measure(client, url) for name, url in pages(root).items()}
            large_reads = dashboard_reads()
            print(f"{'page':28} {'100 tasks (baseline)':>22} {f'{args.tasks} tasks':>22}")
            ok = True
            for name in baseline:
                (b_ms, b_q), (l_ms, l_q) = baseline[name], large[name]
                ok &= l_ms <= GOAL_RATIO * b_ms and abs(l_q - b_q) <= 1
                print(f"{name:28} {b_ms:10.1f} ms {b_q:4d} q   {l_ms:10.1f} ms {l_q:4d} q")
            print(
                f"{'dashboard reads only':28} {base_reads:10.1f} ms          {large_reads:10.1f} ms"
            )
            print("goal met" if ok else "GOAL MISSED")
        finally:
            drop(created, base)


if __name__ == "__main__":
    main()

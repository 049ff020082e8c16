"""Trigger clock precision with the real engine loop on the real clock.

Runs the engine loop (leader lease, dispatcher, trigger clock) in a thread against a fresh
SQLite database (or DATABASE_URL's server, in a throwaway database) for a few minutes, with:
- a schedule trigger on `* * * * *`: lateness = task row written - cron slot boundary;
- a window trigger open all the time, ticking every 2 s: jitter = |gap between ticks - 2 s|.
Baseline, measured in the same run: a bare `Event.wait` timer thread keeping the same 2 s
cadence with no database at all, i.e. the floor this machine gives any timer.

    uv run python benchmarks/trigger_clock.py [--seconds 150] [--tick 0.25]

Targets (issue #4): cron lateness ≤ 1 s; window tick jitter p99 ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from datetime import datetime
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK_MS = 2000


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def _describe(name: str, values_ms: list[float]) -> str:
    if not values_ms:
        return f"{name:<34} no samples"
    return (
        f"{name:<34} n={len(values_ms):<4} p50={_percentile(values_ms, 50):7.1f} ms  "
        f"p99={_percentile(values_ms, 99):7.1f} ms  max={max(values_ms):7.1f} ms"
    )


def _baseline(stop: threading.Event, out: list[float]) -> None:
    """A plain timer: fire every TICK_MS by waiting on an Event, note when it actually fired."""
    start = time.monotonic()
    n = 0
    while not stop.is_set():
        n += 1
        target = start + n * TICK_MS / 1000
        if stop.wait(max(0.0, target - time.monotonic())):
            return
        out.append(time.monotonic())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=150)
    parser.add_argument("--tick", type=float, default=None, help="engine tick (s)")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="openhive-bench-")
    os.environ["OPENHIVE_DATA_DIR"] = tmp
    if args.tick is not None:
        os.environ["OPENHIVE_ENGINE_TICK"] = str(args.tick)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    sys.path.insert(0, str(ROOT))
    db_name = _use_throwaway_postgres()

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        _run(args.seconds, settings.OPENHIVE["ENGINE_TICK_SECONDS"])
    finally:
        if db_name:
            _drop_postgres(db_name)


def _run(seconds: float, engine_tick: float) -> None:
    from django.db import connection

    from openhive.clock import EngineLoop
    from openhive.org.services import team_spawn
    from tasks.models import Task
    from teams.services import team_ensure_main
    from triggers.models import TriggerEvent
    from triggers.services import trigger_create, trigger_enable

    main_team = team_ensure_main()
    ops = team_spawn(parent=main_team, name="ops", description="bench").team
    Task.objects.all().delete()  # the bootstrap task: no workers run in this benchmark
    for name, type_, config in (
        ("cron", "schedule", {"cron": "* * * * *"}),
        (
            "watch",
            "window",
            {
                "watch_window": "* * * * *",
                "tick_interval_ms": TICK_MS,
                "max_ticks_per_window": 100_000,
                "max_tokens_per_window": 10**9,
            },
        ),
    ):
        trigger = trigger_create(
            team=ops, name=name, type=type_, config=config, task="bench", overlap_policy="allow"
        )
        trigger_enable(trigger=trigger)

    stop = threading.Event()
    baseline: list[float] = []
    engine = EngineLoop(enqueue=lambda *_handed: None, slots=0)
    threads = [
        threading.Thread(target=engine.run, args=(stop,), daemon=True),
        threading.Thread(target=_baseline, args=(stop, baseline), daemon=True),
    ]
    print(f"engine tick {engine_tick:.3f} s, database {connection.vendor}, {seconds:.0f} s run")
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)

    lateness = []
    for event in TriggerEvent.objects.filter(trigger__name="cron").select_related("task"):
        slot = datetime.fromisoformat(event.key.removeprefix("schedule:"))
        lateness.append((event.task.created_at - slot).total_seconds() * 1000)
    ticks = list(
        TriggerEvent.objects.filter(trigger__name="watch")
        .order_by("created_at")
        .values_list("task__created_at", flat=True)
    )
    jitter = [abs((b - a).total_seconds() * 1000 - TICK_MS) for a, b in pairwise(ticks)]
    base_jitter = [abs((b - a) * 1000 - TICK_MS) for a, b in pairwise(baseline)]

    if os.environ.get("BENCH_VERBOSE"):
        print("gaps ms:", [round(j) for j in jitter])
    print(_describe("cron lateness after slot", lateness))
    print(_describe("window tick jitter", jitter))
    print(_describe("baseline timer jitter (no DB)", base_jitter))
    if jitter and base_jitter:
        ratio = _percentile(jitter, 99) / max(_percentile(base_jitter, 99), 0.001)
        print(f"window p99 jitter / baseline p99 jitter: {ratio:.1f}x")
    ok_cron = bool(lateness) and max(lateness) <= 1000
    ok_jitter = bool(jitter) and _percentile(jitter, 99) <= 100
    print(f"targets: cron lateness <= 1 s: {'met' if ok_cron else 'NOT met'}; ", end="")
    print(f"jitter p99 <= 100 ms: {'met' if ok_jitter else 'NOT met'}")


def _use_throwaway_postgres() -> str | None:
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        return None
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(base)
    name = f"openhive_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    os.environ["OPENHIVE_BENCH_ADMIN_URL"] = urlunsplit(parts._replace(path="/postgres"))
    return name


def _drop_postgres(name: str) -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(os.environ["OPENHIVE_BENCH_ADMIN_URL"], autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()

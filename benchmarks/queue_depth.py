"""Does a claim, or a dispatch tick, slow down as the queue grows? The same reads at a shallow
queue (the baseline, same run) and a deep one, on the database DATABASE_URL names (else SQLite).

    uv run python benchmarks/queue_depth.py [--shallow 1000] [--deep 20000] [--runs 150]

Measured, each as the median of --runs (milliseconds), with no worker running:
  - batch claim: `task_claim_batch` of 8 tasks (what a pull worker does), its tasks put back
    afterwards (not timed);
  - behind a full team: the same claim when one team at its cap owns the whole head of the
    queue and another team's task waits behind it (the claim must still find that task);
  - dispatch tick: what the engine loop reads to hand tasks to django-q2 workers
    (`tasks_admissible` of 8, the handed-out and the running counts).
Goal: deep / shallow <= 1.3x for each: the reads touch the head of each team's queue, never
the whole queue. (Before: SQLite's claim 4.7x at 20,000 against 4,000; the dispatch tick
~4x on both databases; behind a full team, the task was not found at all.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from harness import throwaway_django

TEAMS = 8
BATCH = 8
GOAL = 1.3


def add_full_team() -> None:
    """A 'full' team at its cap of 1 with a backlog of 300 at the head of the queue, and one
    task of a 'behind' team after it."""
    from openhive.org.services import team_spawn
    from tasks.models import Task
    from tasks.services import task_enqueue
    from tasks.services.claims import task_claim_batch
    from teams.config import load_team_config, write_team_config
    from teams.models import Team
    from teams.services import team_ensure_main

    main = team_ensure_main()
    for name, cap in (("full", 1), ("behind", 5)):
        if not Team.objects.filter(name=name).exists():
            team_spawn(parent=main, name=name, scope_accepts=[name])
            config = load_team_config(name)
            config.max_concurrent_daily_ops = cap
            write_team_config(config)
    full = Team.objects.get(name="full")
    Task.objects.filter(team__name__in=["full", "behind"]).delete()
    Task.objects.bulk_create(
        [Task(team=full, text=f"backlog {i}", priority=Task.Priority.HIGH) for i in range(300)]
    )
    [running] = task_claim_batch(worker="bench-elsewhere", limit=1)
    assert running.team_id == full.pk
    task_enqueue(team=Team.objects.get(name="behind"), text="behind", priority=Task.Priority.HIGH)


def timed(runs: int, case: Callable[[], object], after: Callable[[object], None]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = case()
        times.append(time.perf_counter() - started)
        after(result)
    return statistics.median(times) * 1000


def measure(runs: int, depth: int) -> dict[str, float]:
    """The figures at `depth` queued (the teams' tasks made afresh)."""
    from django.utils import timezone
    from queue_throughput import fill

    from tasks.models import Task
    from tasks.selectors import dispatched_unclaimed_count, tasks_admissible, tasks_running_count
    from tasks.services.claims import task_claim_batch

    def put_back(claimed: list) -> None:
        Task.objects.filter(pk__in=[t.pk for t in claimed]).update(
            status=Task.Status.PENDING, lease_owner="", lease_expires_at=None, started_at=None
        )

    def claim() -> list:
        return task_claim_batch(worker="bench", limit=BATCH)

    def behind() -> list:
        claimed = task_claim_batch(worker="bench", limit=1)
        assert [t.team.name for t in claimed] == ["behind"], claimed
        return claimed

    def tick() -> None:
        now = timezone.now()
        assert len(tasks_admissible(now=now, limit=BATCH)) == BATCH
        dispatched_unclaimed_count(now=now)
        tasks_running_count()

    fill(TEAMS, depth)
    figures = {
        "batch claim": timed(runs, claim, put_back),
        "dispatch tick": timed(runs, tick, lambda _result: None),
    }
    add_full_team()
    figures["behind a full team"] = timed(runs, behind, put_back)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shallow", type=int, default=1000)
    parser.add_argument("--deep", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=150)
    args = parser.parse_args()
    with throwaway_django("openhive-depth-") as (_data, vendor):
        results = {}
        for depth in (args.shallow, args.deep):
            results[depth] = measure(args.runs, depth)
        print(f"database: {vendor}; {TEAMS} teams (+ a full one and one behind it); median ms")
        for name in results[args.shallow]:
            low, high = results[args.shallow][name], results[args.deep][name]
            ratio = high / low
            print(
                f"{name:>20}: {low:6.2f} ms at {args.shallow:,} queued, {high:6.2f} ms at "
                f"{args.deep:,}: {ratio:.2f}x (goal <= {GOAL}x: "
                f"{'met' if ratio <= GOAL else 'NOT met'})"
            )


if __name__ == "__main__":
    main()

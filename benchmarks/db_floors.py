"""Floors under a session's time on the database, for benchmarks/session_step.py: an empty
round trip and a one-row commit, each after a bare session's time of busy Python (when the
server's process, and on a VM its vCPU, has gone idle)."""

from __future__ import annotations

import statistics
import time


def _query_ms(sql: str, after: float, times: int = 100) -> list[float]:
    """`sql` timed `times` times, each after `after` seconds of busy Python (as a session's
    is), in ms, sorted."""
    from django.db import connection

    taken = []
    with connection.cursor() as cursor:
        for _ in range(times):
            until = time.perf_counter() + after
            while time.perf_counter() < until:
                pass
            started = time.perf_counter()
            cursor.execute(sql)
            taken.append((time.perf_counter() - started) * 1000)
    return sorted(taken)


def round_trip_floor(gap: float) -> str:
    """A round trip with nothing in it (SELECT 1), back to back and after `gap` seconds of
    Python (a bare session's time): the database server's process sleeps meanwhile, and on a
    virtual machine waking it (and its idle vCPU) can cost more than its work. A session's
    first query, and its final write after the model calls, pay the second figure."""
    hot, cold = _query_ms("SELECT 1", 0), _query_ms("SELECT 1", gap)
    return (
        f"a round trip (SELECT 1): {statistics.median(hot):.3f} ms back to back; after "
        f"{gap * 1000:.1f} ms of Python, median {statistics.median(cold):.3f} ms, p90 "
        f"{cold[89]:.3f} ms"
    )


def commit_floor(gap: float) -> str:
    """What a commit waiting for the WAL flush costs over one that does not, each a one-row
    INSERT in a query of its own after `gap` seconds of Python. A task's life commits three
    times so (its enqueue, its claim, its end with the session's), a chat turn once (its end);
    the session's own start does not wait (OPENHIVE_SESSION_SYNC_COMMIT)."""
    from django.db import connection

    insert = "INSERT INTO bench_commit_floor (v) VALUES (1)"
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE bench_commit_floor (id serial PRIMARY KEY, v int)")
    try:
        durable = _query_ms(insert, gap)
        unflushed = _query_ms(f"SET LOCAL synchronous_commit = off; {insert}", gap)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE bench_commit_floor")
    return (
        f"a one-row commit after {gap * 1000:.1f} ms of Python: "
        f"{statistics.median(durable):.3f} ms waiting for the WAL flush, "
        f"{statistics.median(unflushed):.3f} ms not (median); a task's life waits for 2 "
        "(its enqueue, its end; its claim does not), a chat turn for 1"
    )

"""Floors under a session's time on the database, for benchmarks/session_step.py: an empty
round trip and a one-row commit, each after a bare session's time of busy Python (when the
server's process, and on a VM its vCPU, has gone idle)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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


def wait_cost(call: Callable[[], object], session_ms: float, times: int = 200) -> str:
    """What one wait for the database costs a session: its round trip, and how much slower
    the Python after it runs. `call` (one bare model call, a large working set of Python) is
    timed right after another, and right after a SELECT 1 that followed another. While the
    thread waits, its core goes idle; on a VM the host may run other work there, and the call
    after the wait runs with cold caches. The floor above times a busy loop, which has almost
    nothing to lose. `session_ms`: a bare session's time, to put each mode's waits in its
    units."""
    from django.db import connection

    back_to_back, after_wait, trips = [], [], []
    with connection.cursor() as cursor:
        for number in range(times * 2):
            call()
            waited = number % 2 == 1
            if waited:
                started = time.perf_counter()
                cursor.execute("SELECT 1")
                trips.append(time.perf_counter() - started)
            started = time.perf_counter()
            call()
            (after_wait if waited else back_to_back).append(time.perf_counter() - started)
    trip = statistics.median(trips) * 1000
    slower = (statistics.median(after_wait) - statistics.median(back_to_back)) * 1000
    wait = trip + slower
    return (
        f"a wait between two bare model calls (a SELECT 1): {wait:.3f} ms, its round trip "
        f"{trip:.3f} ms and the next call {slower:+.3f} ms against back to back (median); "
        f"a chat turn waits twice (its start, its end): {2 * wait / session_ms:+.2f}x the "
        f"bare session; a task 4 times (enqueue, claim, start, end): "
        f"{4 * wait / session_ms:+.2f}x, before its loop's handover"
    )

"""A lost database connection (a failover, a restart, `pg_terminate_backend`) in the middle of
a session costs nothing: the session's writes reconnect, the cancel check and the lease
renewal reconnect, the task ends done on its first attempt and no tool call runs twice.
PostgreSQL only: SQLite has no connection to lose."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections
from pydantic import BaseModel, ConfigDict

from openhive.core import registry
from openhive.core.registry import tool
from openhive.engine.models import Session
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.runner import run_next_task, run_task
from tasks.services import task_enqueue

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="SQLite has no server connection to reset"
    ),
]


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


@pytest.fixture
def counted_tool():
    calls: list[int] = []
    before = set(registry._REGISTRY)

    @tool(name="zz_count_me", description="Count my calls", args=_NoArgs)
    def count_me(ctx, args):
        calls.append(ctx.task_id)
        return {"counted": len(calls)}

    yield calls
    for name in set(registry._REGISTRY) - before:
        del registry._REGISTRY[name]


@pytest.fixture
def ops(main_team):
    team = team_spawn(parent=main_team, name="ops", description="Operations").team
    Task.objects.filter(team=team).delete()  # its bootstrap is not what these tests run
    return team


def _terminate_other_backends() -> int:
    """Kill every connection to the test database but the killer's own, as a failover does."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def _killer(stop: threading.Event, every: float, first_after: float) -> threading.Thread:
    killed: list[int] = []

    def run() -> None:
        try:
            if stop.wait(first_after):
                return
            while True:
                killed.append(_terminate_other_backends())
                if stop.wait(every):
                    return
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.killed = killed  # type: ignore[attr-defined]
    thread.start()
    return thread


def _rules(delay_ms: int) -> list[dict]:
    return [
        {
            "when": {"team": "ops", "last": "user"},
            "reply": {"tool_calls": [{"name": "zz_count_me"}]},
        },
        {"when": {"team": "ops", "last": "tool"}, "reply": {"content": "ok", "delay_ms": delay_ms}},
    ]


def test_a_reset_during_a_model_call_costs_no_attempt_and_runs_no_tool_twice(
    ops, scripted_provider, counted_tool
):
    scripted_provider(_rules(delay_ms=1500))
    task = task_enqueue(team=ops, text="work")
    stop = threading.Event()
    # The tool runs at once; the reset lands while the second model call waits.
    killer = _killer(stop, every=60, first_after=0.7)
    try:
        assert run_task(task.pk) == "done"
    finally:
        stop.set()
        killer.join()
    connection.close()
    assert killer.killed and killer.killed[0] >= 1  # the worker's connection was cut
    task.refresh_from_db()
    assert task.status == "done" and task.attempts == 1 and task.result == "ok"
    assert counted_tool == [task.pk]
    session = Session.objects.get(task=task)
    assert session.stop_reason == "completed" and session.turns == 2


def test_repeated_resets_under_load_fail_no_task(ops, scripted_provider, counted_tool):
    scripted_provider(_rules(delay_ms=200))
    tasks = [task_enqueue(team=ops, text=f"work {i}") for i in range(8)]
    stop = threading.Event()
    killer = _killer(stop, every=0.4, first_after=0.3)

    def worker() -> None:
        try:
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 3:
                try:
                    ran = run_next_task()
                except Exception:  # a claim cut by a reset: the pull worker goes on
                    connections.close_all()
                    ran = None
                if ran is not None:
                    idle_since = time.monotonic()
                else:
                    time.sleep(0.05)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=worker) for _ in range(2)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=120)
    stop.set()
    killer.join()
    connection.close()
    assert sum(killer.killed) >= 3
    rows = list(Task.objects.filter(pk__in=[t.pk for t in tasks]).values("status", "result"))
    assert [r["status"] for r in rows] == ["done"] * 8, rows
    assert not Session.objects.filter(task__in=tasks, finished_at__isnull=True).exists()

"""query_team / query_teams (real threads, real sessions with the scripted provider's delays)
and cancellation that stops a session while it waits on a slow model reply."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connections

from openhive.core.context import ToolContext
from openhive.engine.models import Session
from openhive.engine.tool_calls import call_tool
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_cancel, task_enqueue
from teams.models import Team
from tests.factories import claim
from tests.queries import as_written

# Sessions run in threads that need committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ("alpha", "beta", "gamma", "delta", "eps", "zeta")


def call(caller: Team, tool: str, /, task_id: int | None = None, **arguments) -> dict:
    ctx = ToolContext(team=caller, task_id=task_id, actor=f"{caller.name}-agent")
    return call_tool(ctx, tool, json.dumps(arguments))


@pytest.fixture
def children(main_team, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "CANCEL_POLL_SECONDS": 0.05}
    teams = {n: team_spawn(parent=main_team, name=n, scope_accepts=[n]).team for n in NAMES}
    Task.objects.all().delete()
    return main_team, teams


def slow_replies(scripted_provider, delay_ms: int, slow: dict[str, int] | None = None) -> None:
    slow = slow or {}
    scripted_provider(
        [
            {
                "when": {"team": n},
                "reply": {"content": f"{n} reporting", "delay_ms": slow.get(n, delay_ms)},
            }
            for n in NAMES
        ]
        + [{"when": {}, "reply": {"content": "main here"}}]
    )


def test_a_query_task_is_admitted_in_one_read_and_ended_in_one_statement(
    children, scripted_provider
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    main, teams = children
    slow_replies(scripted_provider, 0)
    with CaptureQueriesContext(connection) as captured:
        result = call(main, "query_team", team="alpha", query="status?")
    assert result["success"], result
    sqls = [q["sql"] for q in as_written(captured.captured_queries)]
    # The org-op mutex and the running count: one query inside the team's section.
    [state] = [sql for sql in sqls if "tasks_orgoplock" in sql]
    assert "count(" in state.lower() and "tasks_task" in state
    # The end is one conditional UPDATE of the row as admitted: no re-read under a lock.
    task_writes = [sql for sql in sqls if sql.startswith('UPDATE "tasks_task"')]
    assert len(task_writes) == 1 and "lease_owner" in task_writes[0]
    assert not [sql for sql in sqls if 'FROM "tasks_task"' in sql and "FOR UPDATE" in sql]
    task = Task.objects.get(team=teams["alpha"])
    assert (task.status, task.result, task.lease_owner) == ("done", "alpha reporting", "")


def test_query_team_returns_the_childs_answer_and_takes_a_slot(children, scripted_provider):
    main, teams = children
    slow_replies(scripted_provider, 0)
    result = call(main, "query_team", team="alpha", query="status?")
    assert result == {"success": True, "team": "alpha", "response": "alpha reporting"}
    task = Task.objects.get(team=teams["alpha"])
    assert (task.type, task.status, task.stop_reason, task.result) == (
        "query",
        "done",
        "completed",
        "alpha reporting",
    )
    assert Session.objects.get(task=task).stop_reason == "completed"


def test_query_team_guards(children, scripted_provider):
    main, teams = children
    slow_replies(scripted_provider, 0)
    assert call(teams["alpha"], "query_team", team="beta", query="x")["code"] == "NOT_PARENT"
    assert call(main, "query_team", team="ghost", query="x")["code"] == "NOT_FOUND"
    assert call(main, "query_team", team="alpha", query="")["code"] == "INVALID_ARGUMENTS"
    assert not Session.objects.exists()


def test_query_team_on_a_saturated_child_is_refused_without_a_session(children, scripted_provider):
    from openhive.core import paths

    main, teams = children
    slow_replies(scripted_provider, 0)
    config = paths.team_dir("alpha") / "config.yaml"
    config.write_text(config.read_text().replace("daily_ops: 5", "daily_ops: 1"))
    busy = task_enqueue(team=teams["alpha"], text="busy")
    claim(task_id=busy.pk, worker="w")
    result = call(main, "query_team", team="alpha", query="x")
    assert result == {
        "success": False,
        "error": 'query_team failed: team "alpha" is saturated (1/1 daily-ops running); '
        "try again later",
        "code": "QUERY_FAILED",
    }
    assert not Session.objects.exists()


def test_query_teams_runs_children_in_parallel(children, scripted_provider):
    main, _ = children
    slow_replies(scripted_provider, 1000)
    started = time.monotonic()
    result = call(
        main,
        "query_teams",
        targets=[{"team": n, "query": "status?"} for n in ("alpha", "beta", "gamma")],
    )
    wall = time.monotonic() - started
    assert result == {
        "success": True,
        "results": [
            {"team": n, "ok": True, "result_or_error": f"{n} reporting"}
            for n in ("alpha", "beta", "gamma")
        ],
    }
    assert wall < 2.4, f"fan-out took {wall:.2f}s; serial would be over 3s"
    assert Task.objects.filter(type="query", status="done").count() == 3


def test_query_teams_returns_partial_results_when_one_child_times_out(children, scripted_provider):
    main, _ = children
    slow_replies(scripted_provider, 50, slow={"beta": 5000})
    started = time.monotonic()
    result = call(
        main,
        "query_teams",
        targets=[
            {"team": "alpha", "query": "x"},
            {"team": "beta", "query": "x", "timeout_ms": 300},
        ],
        default_timeout_ms=4000,
    )
    assert time.monotonic() - started < 2.0  # the slow child is abandoned, not awaited
    assert result["success"] is True
    assert result["results"] == [
        {"team": "alpha", "ok": True, "result_or_error": "alpha reporting"},
        {"team": "beta", "ok": False, "result_or_error": "timeout after 300 ms"},
    ]
    beta = Task.objects.get(team__name="beta")
    assert beta.status == "failed" and beta.stop_reason == "timeout"


def test_query_teams_guards_run_nothing(children, scripted_provider):
    main, teams = children
    slow_replies(scripted_provider, 0)
    six = [{"team": n, "query": "x"} for n in NAMES]
    assert call(main, "query_teams", targets=six)["code"] == "INVALID_ARGUMENTS"
    dup = [{"team": "alpha", "query": "x"}, {"team": "alpha", "query": "y"}]
    assert call(main, "query_teams", targets=dup)["code"] == "INVALID_INPUT"
    grandchild = team_spawn(parent=teams["alpha"], name="alpha-sub", scope_accepts=["s"]).team
    mixed = [{"team": "beta", "query": "x"}, {"team": grandchild.name, "query": "x"}]
    assert call(main, "query_teams", targets=mixed)["code"] == "NOT_PARENT"
    assert call(main, "query_teams", targets=[])["code"] == "INVALID_ARGUMENTS"
    assert not Session.objects.exists()


def test_cancelling_the_parent_task_cancels_the_fan_out(children, scripted_provider):
    main, _ = children
    slow_replies(scripted_provider, 5000)
    parent_task = task_enqueue(team=main, text="orchestrate")
    claim(task_id=parent_task.pk, worker="w")
    threading.Timer(0.4, lambda: task_cancel(task_id=parent_task.pk)).start()
    started = time.monotonic()
    result = call(
        main,
        "query_teams",
        task_id=parent_task.pk,
        targets=[{"team": n, "query": "x"} for n in ("alpha", "beta")],
    )
    assert time.monotonic() - started < 2.5
    assert result["success"] is False
    assert [r["result_or_error"] for r in result["results"]] == ["cancelled", "cancelled"]
    assert set(Session.objects.values_list("stop_reason", flat=True)) == {"cancelled"}


def _run_in_thread(task_id: int) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def target() -> None:
        try:
            box["status"] = run_task(task_id)
        finally:
            connections.close_all()  # this thread's own connection (PostgreSQL teardown)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def _wait_for_session(task: Task) -> None:
    deadline = time.monotonic() + 10
    while not Session.objects.filter(task=task).exists():
        assert time.monotonic() < deadline, "session never started"
        time.sleep(0.02)
    time.sleep(0.2)  # well inside the slow model call


def test_cancel_stops_a_session_waiting_on_a_slow_model_reply(children, scripted_provider):
    _, teams = children
    slow_replies(scripted_provider, 20_000)
    task = task_enqueue(team=teams["alpha"], text="slow work")
    thread, box = _run_in_thread(task.pk)
    _wait_for_session(task)
    started = time.monotonic()
    task_cancel(task_id=task.pk, reason="operator cancelled")
    thread.join(timeout=5)
    assert not thread.is_alive() and time.monotonic() - started < 2
    task.refresh_from_db()
    assert (task.status, task.stop_reason, task.result) == (
        "cancelled",
        "cancelled",
        "operator cancelled",
    )
    assert box["status"] == "cancelled"
    assert Session.objects.get(task=task).stop_reason == "cancelled"


def test_replace_policy_cancels_running_task_and_stops_its_session(children, scripted_provider):
    main, teams = children
    slow_replies(scripted_provider, 20_000)
    task = task_enqueue(team=teams["alpha"], text="slow work")
    thread, _ = _run_in_thread(task.pk)
    _wait_for_session(task)
    result = call(main, "delegate_task", team="alpha", task="urgent", overlap_policy="replace")
    assert result["status"] == "queued" and result["replaced_task_ids"] == [task.pk]
    thread.join(timeout=5)
    assert not thread.is_alive()
    task.refresh_from_db()
    assert task.status == "cancelled" and task.result == "replaced by newer delegated work"
    assert Session.objects.get(task=task).stop_reason == "cancelled"
    assert Task.objects.get(pk=result["task_id"]).status == "pending"

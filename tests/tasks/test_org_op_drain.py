"""The org-op mutex with real concurrency: sessions running in threads, an org tool waiting for
them to drain while new daily-ops of the team wait, then running alone and releasing."""

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
from tasks.models import OrgOpLock, Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.models import ScopeKeyword
from tests.factories import claim

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(func, *args) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def target() -> None:
        try:
            box["result"] = func(*args)
            box["at"] = time.monotonic()
        except BaseException as exc:  # surfaced by the test's own assertions
            box["error"] = repr(exc)
            raise
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def _until(predicate, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.02)


@pytest.fixture
def org(main_team, scripted_provider, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "ORG_OP_POLL_SECONDS": 0.02}
    scripted_provider(
        [
            {"when": {"team": "main"}, "reply": {"content": "main done", "delay_ms": 1500}},
            {"when": {}, "reply": {"content": "ok"}},
        ]
    )
    ops = team_spawn(parent=main_team, name="ops", scope_accepts=["ops"]).team
    Task.objects.all().delete()
    return main_team, ops


def update_scope(team, keyword: str, task_id: int | None = None) -> dict:
    ctx = ToolContext(team=team, task_id=task_id, actor="main-agent")
    return call_tool(ctx, "update_team", json.dumps({"team": "ops", "scope_add": [keyword]}))


def test_org_op_waits_for_in_flight_daily_ops_blocks_new_ones_then_runs_alone(org):
    main, _ops = org
    first, second = (task_enqueue(team=main, text=f"work {i}") for i in (1, 2))
    runners = [_in_thread(run_task, t.pk) for t in (first, second)]
    _until(lambda: Session.objects.filter(team=main).count() == 2)

    org_thread, org_box = _in_thread(update_scope, main, "kubernetes")
    _until(lambda: OrgOpLock.objects.filter(team=main).exists())
    # while the mutex is held, new work of the team is not admitted (it waits, not rejected)
    waiting = task_enqueue(team=main, text="arrived during the org-op")
    assert run_task(waiting.pk) == "not-admitted"
    assert Task.objects.get(pk=waiting.pk).status == "pending"
    assert not ScopeKeyword.objects.filter(keyword="kubernetes").exists()  # still draining

    org_thread.join(timeout=15)
    for thread, _ in runners:
        thread.join(timeout=15)
    assert "error" not in org_box, org_box
    assert org_box["result"] == {"success": True, "team": "ops", "scope": ["kubernetes", "ops"]}
    # the org-op finished only after both in-flight sessions had finished
    assert all(box["at"] <= org_box["at"] for _, box in runners)
    assert [box["result"] for _, box in runners] == ["done", "done"]
    assert not OrgOpLock.objects.exists()
    # released: the waiting task is admitted now
    assert run_task(waiting.pk) == "done"


def test_two_org_ops_on_one_team_run_one_after_the_other(org):
    main, _ = org
    busy = task_enqueue(team=main, text="busy")
    runner, _ = _in_thread(run_task, busy.pk)
    _until(lambda: Session.objects.filter(team=main).exists())
    a, a_box = _in_thread(update_scope, main, "alpha")
    b, b_box = _in_thread(update_scope, main, "beta")
    for thread in (a, b, runner):
        thread.join(timeout=15)
    assert a_box["result"]["success"] and b_box["result"]["success"]
    assert sorted(
        ScopeKeyword.objects.filter(team__name="ops").values_list("keyword", flat=True)
    ) == [
        "alpha",
        "beta",
        "ops",
    ]


def test_the_calling_sessions_own_task_is_not_waited_for(org):
    main, _ = org
    own = task_enqueue(team=main, text="the session calling the org tool")
    claim(task_id=own.pk, worker="w")
    started = time.monotonic()
    assert update_scope(main, "self", task_id=own.pk)["success"] is True
    assert time.monotonic() - started < 1


def test_an_org_op_that_cannot_drain_in_time_changes_nothing_and_releases(org, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "ORG_OP_DRAIN_SECONDS": 0.3}
    main, _ = org
    stuck = task_enqueue(team=main, text="long")
    claim(task_id=stuck.pk, worker="elsewhere")
    result = update_scope(main, "never")
    assert result == {
        "success": False,
        "error": 'team "main" still has 1 running task(s) after 0.3 s; the org operation was '
        "not run",
        "code": "DRAIN_TIMEOUT",
    }
    assert not ScopeKeyword.objects.filter(keyword="never").exists()
    assert not OrgOpLock.objects.exists()

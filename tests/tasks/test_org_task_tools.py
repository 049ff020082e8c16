"""delegate_task overlap policies, list_completed_tasks and enqueue_parent_task through
call_tool, with their guards and exact result shapes."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.services import task_enqueue, task_finish
from teams.models import Team
from tests.factories import claim

pytestmark = pytest.mark.django_db


def call(caller: Team, tool: str, /, **arguments) -> dict:
    ctx = ToolContext(team=caller, source_channel="web:alice", actor=f"{caller.name}-agent")
    return call_tool(ctx, tool, json.dumps(arguments))


@pytest.fixture
def tree(main_team):
    ops = team_spawn(parent=main_team, name="ops", scope_accepts=["ops"]).team
    db = team_spawn(parent=ops, name="ops-db", scope_accepts=["db"]).team
    Task.objects.all().delete()  # no bootstrap work in flight unless a test adds some
    return main_team, ops, db


# --- delegate_task overlap policies ----------------------------------------------------------


def test_without_work_in_flight_every_policy_queues(tree):
    main, _ops, _ = tree
    for policy in ("allow", "skip", "confirm", "replace"):
        Task.objects.all().delete()
        result = call(main, "delegate_task", team="ops", task="x", overlap_policy=policy)
        assert result["status"] == "queued" and result["in_flight"] == []
        assert Task.objects.get().pk == result["task_id"]


def test_skip_drops_the_new_task_and_shows_what_is_in_flight(tree):
    main, ops, _ = tree
    busy = task_enqueue(team=ops, text="busy", correlation_id="c-1")
    result = call(main, "delegate_task", team="ops", task="new", overlap_policy="skip")
    assert result == {
        "success": True,
        "status": "skipped",
        "team": "ops",
        "priority": "normal",
        "overlap_policy_applied": "skip",
        "in_flight": [
            {
                "task_id": busy.pk,
                "type": "delegate",
                "status": "pending",
                "age_ms": result["in_flight"][0]["age_ms"],
                "correlation_id": "c-1",
            }
        ],
    }
    assert list(Task.objects.values_list("text", flat=True)) == ["busy"]


def test_confirm_queues_nothing_and_asks_first(tree):
    main, ops, _ = tree
    busy = task_enqueue(team=ops, text="busy")
    claim(task_id=busy.pk, worker="w")
    result = call(main, "delegate_task", team="ops", task="new", overlap_policy="confirm")
    assert result["status"] == "in_flight" and result["requires_confirmation"] is True
    assert "task_id" not in result and "overlap_policy allow" in result["message"]
    assert result["in_flight"][0]["status"] == "running"
    assert Task.objects.count() == 1


def test_allow_queues_behind_work_in_flight(tree):
    main, ops, _ = tree
    task_enqueue(team=ops, text="busy")
    result = call(main, "delegate_task", team="ops", task="new", priority="high")
    assert result["status"] == "queued" and len(result["in_flight"]) == 1
    assert Task.objects.get(pk=result["task_id"]).priority == Task.Priority.HIGH


def test_replace_cancels_pending_and_running_work_then_queues(tree):
    main, ops, _ = tree
    running = task_enqueue(team=ops, text="running")
    claim(task_id=running.pk, worker="w")
    pending = task_enqueue(team=ops, text="pending")
    result = call(main, "delegate_task", team="ops", task="new", overlap_policy="replace")
    assert result["status"] == "queued"
    assert sorted(result["replaced_task_ids"]) == sorted([running.pk, pending.pk])
    statuses = dict(Task.objects.values_list("text", "status"))
    assert statuses == {"running": "cancelled", "pending": "cancelled", "new": "pending"}
    # the worker that held "running" can no longer record a result over "cancelled"
    assert task_finish(task_id=running.pk, worker="w", status="done", result="late") is None
    assert Task.objects.get(pk=running.pk).result == "replaced by newer delegated work"


def test_delegate_guards(tree):
    main, _ops, _db = tree
    assert call(main, "delegate_task", team="ops-db", task="x")["code"] == "NOT_PARENT"
    assert call(main, "delegate_task", team="ghost", task="x")["code"] == "NOT_FOUND"
    bad = call(main, "delegate_task", team="ops", task="x", overlap_policy="sometimes")
    assert bad["code"] == "INVALID_ARGUMENTS"
    assert call(main, "delegate_task", team="ops", task="")["code"] == "INVALID_ARGUMENTS"
    assert not Task.objects.exists()


# --- list_completed_tasks --------------------------------------------------------------------


def _finished(team: Team, text: str, status: str, result: str) -> Task:
    task = task_enqueue(team=team, text=text)
    claim(task_id=task.pk, worker="w")
    task_finish(task_id=task.pk, worker="w", status=status, result=result, stop_reason="completed")
    return Task.objects.get(pk=task.pk)


def test_list_completed_tasks_of_a_child_with_snippets_newest_first(tree):
    main, ops, _ = tree
    first = _finished(ops, "a", "done", "x" * 500)
    second = _finished(ops, "b", "failed", "Error: boom")
    task_enqueue(team=ops, text="still pending")
    result = call(main, "list_completed_tasks", team="ops")
    assert result["success"] is True and result["team"] == "ops"
    assert [t["task_id"] for t in result["tasks"]] == [second.pk, first.pk]
    entry = result["tasks"][1]
    assert entry == {
        "task_id": first.pk,
        "type": "delegate",
        "status": "done",
        "stop_reason": "completed",
        "duration_ms": first.duration_ms,
        "result_snippet": "x" * 200,
        "created_at": first.created_at.isoformat(),
        "finished_at": first.finished_at.isoformat(),
    }


def test_list_completed_tasks_defaults_to_own_team_and_honours_since_and_limit(tree):
    _main, ops, _ = tree
    old = _finished(ops, "old", "done", "old")
    Task.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=8))
    for i in range(3):
        _finished(ops, f"t{i}", "done", f"r{i}")
    own = call(ops, "list_completed_tasks")
    assert own["team"] == "ops" and len(own["tasks"]) == 3  # older than 7 days left out
    since = (timezone.now() - timedelta(days=30)).isoformat()
    assert len(call(ops, "list_completed_tasks", since=since)["tasks"]) == 4
    assert len(call(ops, "list_completed_tasks", limit=2)["tasks"]) == 2


def test_list_completed_tasks_only_for_own_team_or_children(tree):
    main, ops, db = tree
    assert call(main, "list_completed_tasks", team="ops-db")["code"] == "NOT_PARENT"
    assert call(db, "list_completed_tasks", team="ops")["code"] == "NOT_PARENT"
    assert call(ops, "list_completed_tasks", limit=0)["code"] == "INVALID_ARGUMENTS"
    assert call(ops, "list_completed_tasks", limit=201)["code"] == "INVALID_ARGUMENTS"


# --- enqueue_parent_task ---------------------------------------------------------------------


def test_handoff_queues_work_for_the_parent_with_context(tree):
    _, ops, db = tree
    result = call(
        db,
        "enqueue_parent_task",
        task="Resize the volume",
        priority="high",
        context="disk at 95%",
        correlation_id="disk-1",
    )
    assert result == {
        "success": True,
        "status": "queued",
        "task_id": result["task_id"],
        "team": "ops",
        "correlation_id": "disk-1",
    }
    task = Task.objects.get(pk=result["task_id"])
    assert task.team == ops and task.priority == Task.Priority.HIGH and task.type == "delegate"
    assert task.text == (
        "[Work handoff from ops-db] Resize the volume\n\nContext from ops-db:\ndisk at 95%"
    )
    assert task.source_channel == "web:alice"


def test_handoff_generates_a_correlation_id_when_none_is_given(tree):
    _, _, db = tree
    result = call(db, "enqueue_parent_task", task="x")
    assert result["correlation_id"].startswith("handoff:ops-db:")


def test_handoff_with_the_same_correlation_id_within_the_window_is_dropped(tree, settings):
    _, ops, db = tree
    first = call(db, "enqueue_parent_task", task="x", correlation_id="same")
    again = call(db, "enqueue_parent_task", task="x", correlation_id="same")
    assert again == {
        "success": False,
        "error": f'correlation_id "same" was already handed off as task {first["task_id"]} '
        "within the last 60 s; not queued again",
        "code": "DUPLICATE_CORRELATION_ID",
    }
    assert Task.objects.filter(team=ops).count() == 1
    # after the window the same id is new work again
    Task.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    assert call(db, "enqueue_parent_task", task="x", correlation_id="same")["success"] is True


def test_handoff_rate_cap_per_child_per_minute_is_kept_in_the_database(tree, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "HANDOFF_RATE_PER_MINUTE": 3}
    _main, ops, db = tree
    sibling = team_spawn(parent=ops, name="ops-web", scope_accepts=["web"]).team
    for i in range(3):
        assert call(db, "enqueue_parent_task", task=f"t{i}")["success"] is True
    refused = call(db, "enqueue_parent_task", task="t3")
    assert refused["success"] is False and refused["code"] == "RATE_LIMIT_EXCEEDED"
    assert refused["error"].startswith(
        'rate cap reached: at most 3 handoffs per minute from "ops-db"'
    )
    assert call(sibling, "enqueue_parent_task", task="other child")["success"] is True
    assert Task.objects.filter(team=ops, type="delegate").count() == 4
    Task.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    assert call(db, "enqueue_parent_task", task="later")["success"] is True


def test_main_has_no_parent_to_hand_work_to(tree):
    main, _, _ = tree
    result = call(main, "enqueue_parent_task", task="x")
    assert result["success"] is False and result["code"] == "NO_PARENT"
    assert not Task.objects.exists()

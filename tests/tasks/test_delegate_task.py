"""delegate_task: a team queues work only for its own children."""

from __future__ import annotations

import json

import pytest

from openhive.core.context import ToolContext
from openhive.engine.models import ToolCall
from openhive.engine.tool_calls import call_tool
from tasks.models import Task
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree(main_team):
    ops = TeamFactory(name="ops", parent=main_team)
    research = TeamFactory(name="research", parent=main_team)
    db = TeamFactory(name="ops-db", parent=ops)
    return main_team, ops, research, db


def delegate(caller, **arguments) -> dict:
    ctx = ToolContext(team=caller, source_channel="web:alice", actor=f"{caller.name}-agent")
    return call_tool(ctx, "delegate_task", json.dumps(arguments))


def test_delegating_to_a_child_queues_a_task(tree):
    main, ops, _, _ = tree
    result = delegate(main, team="ops", task="Check disk usage")
    assert result == {
        "status": "queued",
        "task_id": result["task_id"],
        "team": "ops",
        "priority": "normal",
        "overlap_policy_applied": "allow",
        "in_flight": [],
        "success": True,
    }
    task = Task.objects.get(pk=result["task_id"])
    assert task.team == ops and task.text == "Check disk usage"
    assert task.type == "delegate" and task.status == "pending"
    assert task.priority == Task.Priority.NORMAL
    assert task.source_channel == "web:alice" and task.created_by == "main-agent"


@pytest.mark.parametrize(
    ("name", "value"), [("critical", 0), ("high", 1), ("normal", 2), ("low", 3)]
)
def test_priority_names_set_the_queue_priority(tree, name, value):
    main, _, _, _ = tree
    result = delegate(main, team="ops", task="x", priority=name)
    assert result["priority"] == name
    assert Task.objects.get(pk=result["task_id"]).priority == value


def test_null_priority_means_normal(tree):
    main, _, _, _ = tree
    result = delegate(main, team="ops", task="x", priority=None)
    assert Task.objects.get(pk=result["task_id"]).priority == Task.Priority.NORMAL


def test_unknown_priority_is_refused(tree):
    main, _, _, _ = tree
    result = delegate(main, team="ops", task="x", priority="urgent")
    assert result["success"] is False and result["code"] == "INVALID_ARGUMENTS"
    assert "priority" in result["error"]
    assert not Task.objects.exists()


def test_a_grandchild_is_not_a_child(tree):
    main, _, _, _ = tree
    result = delegate(main, team="ops-db", task="x")
    assert result["success"] is False and result["code"] == "NOT_PARENT"
    assert "ops-db" in result["error"] and "own child teams" in result["error"]
    assert not Task.objects.exists()


def test_a_sibling_is_not_a_child(tree):
    _, ops, _, _ = tree
    result = delegate(ops, team="research", task="x")
    assert result["success"] is False and result["code"] == "NOT_PARENT"
    assert not Task.objects.exists()


def test_a_team_cannot_delegate_to_its_parent_or_itself(tree):
    _, ops, _, _ = tree
    assert delegate(ops, team="main", task="x")["code"] == "NOT_PARENT"
    assert delegate(ops, team="ops", task="x")["code"] == "NOT_PARENT"
    assert not Task.objects.exists()


def test_a_child_delegates_to_its_own_child(tree):
    _, ops, _, db = tree
    result = delegate(ops, team="ops-db", task="Vacuum")
    assert result["success"] is True
    assert Task.objects.get(pk=result["task_id"]).team == db


def test_unknown_team_is_not_found(tree):
    main, _, _, _ = tree
    result = delegate(main, team="nobody", task="x")
    assert result["success"] is False and result["code"] == "NOT_FOUND"
    assert '"nobody" not found' in result["error"]
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    "arguments",
    [{"team": "ops"}, {"task": "x"}, {"team": "", "task": "x"}, {"team": "ops", "task": ""}],
)
def test_missing_or_empty_arguments_are_refused(tree, arguments):
    main, _, _, _ = tree
    result = delegate(main, **arguments)
    assert result["success"] is False and result["code"] == "INVALID_ARGUMENTS"
    assert not Task.objects.exists()


def test_whitespace_only_task_is_refused(tree):
    main, _, _, _ = tree
    result = delegate(main, team="ops", task="   ")
    assert result["success"] is False and "must not be empty" in result["error"]
    assert not Task.objects.exists()


def test_every_delegation_is_audited(tree):
    main, _, _, _ = tree
    delegate(main, team="ops", task="x")
    delegate(main, team="ops-db", task="x")
    rows = list(ToolCall.objects.order_by("id").values_list("tool", "success"))
    assert rows == [("delegate_task", True), ("delegate_task", False)]

"""A task's todo list: the tools of the session that runs it (set_todos, add_todo,
complete_todo), bounded, scoped to the calling task, shown in the task's API detail and admin."""

from __future__ import annotations

import pytest

from openhive.core import scrubbing
from openhive.core.context import ToolContext
from openhive.engine.models import ToolCall
from openhive.engine.tool_calls import call_tool
from openhive.org.services import team_spawn
from tasks.models import TaskTodo
from tasks.runner import run_task
from tasks.services import MAX_TODO_CHARS, MAX_TODOS, task_enqueue
from tests.api.conftest import api_client, api_token, fast_password_hashing  # noqa: F401
from tests.factories import TaskFactory, TeamFactory


@pytest.fixture
def ops(main_team):
    return TeamFactory(name="ops", parent=main_team)


def call(team, tool, task=None, **arguments):
    ctx = ToolContext(team=team, actor=team.name, task_id=task.pk if task else None)
    return call_tool(ctx, tool, arguments)


@pytest.mark.django_db
def test_a_task_session_plans_adds_and_ticks_off_todos(ops):
    task = TaskFactory(team=ops, status="running")
    listed = call(ops, "set_todos", task, items=["Read the logs", "Find the cause"])
    assert listed["success"] and listed["count"] == 2 and listed["remaining"] == 2
    assert [t["text"] for t in listed["todos"]] == ["Read the logs", "Find the cause"]
    added = call(ops, "add_todo", task, text="  Write   the fix ")
    assert added["added"]["text"] == "Write the fix" and added["added"]["position"] == 3
    first = listed["todos"][0]["id"]
    done = call(ops, "complete_todo", task, id=first)
    assert done["completed"]["done"] is True and done["completed"]["completed_at"]
    assert done["remaining"] == 2
    # Completing twice is harmless.
    assert call(ops, "complete_todo", task, id=first)["remaining"] == 2
    replaced = call(ops, "set_todos", task, items=["Ship it"])
    assert [(t["text"], t["done"]) for t in replaced["todos"]] == [("Ship it", False)]
    assert list(TaskTodo.objects.values_list("text", flat=True)) == ["Ship it"]
    assert call(ops, "set_todos", task, items=[])["count"] == 0


@pytest.mark.django_db
def test_a_chat_turn_without_a_task_is_told_todos_need_one(ops):
    for tool, arguments in (
        ("set_todos", {"items": ["x"]}),
        ("add_todo", {"text": "x"}),
        ("complete_todo", {"id": 1}),
    ):
        refused = call(ops, tool, **arguments)
        assert refused["success"] is False and refused["code"] == "NO_TASK"
        assert "task" in refused["error"]
    assert not TaskTodo.objects.exists()


@pytest.mark.django_db
def test_todos_are_bounded_and_bad_input_changes_nothing(ops):
    task = TaskFactory(team=ops, status="running")
    call(ops, "set_todos", task, items=["keep me"])
    too_many = call(ops, "set_todos", task, items=[f"t{i}" for i in range(MAX_TODOS + 1)])
    assert too_many["success"] is False
    too_long = call(ops, "set_todos", task, items=["ok", "x" * (MAX_TODO_CHARS + 1)])
    assert too_long["success"] is False and too_long["code"] == "TODO_TOO_LONG"
    blank = call(ops, "set_todos", task, items=["ok", "   "])
    assert blank["success"] is False and blank["code"] == "INVALID_TODO"
    assert call(ops, "add_todo", task, text="")["code"] == "INVALID_ARGUMENTS"
    assert call(ops, "complete_todo", task, id=0)["code"] == "INVALID_ARGUMENTS"
    assert list(TaskTodo.objects.values_list("text", flat=True)) == ["keep me"]
    call(ops, "set_todos", task, items=[f"t{i}" for i in range(MAX_TODOS)])
    full = call(ops, "add_todo", task, text="one more")
    assert full["success"] is False and full["code"] == "TOO_MANY_TODOS"
    assert TaskTodo.objects.filter(task=task).count() == MAX_TODOS


@pytest.mark.django_db
def test_a_task_cannot_complete_another_tasks_todo(ops, main_team):
    mine = TaskFactory(team=ops, status="running")
    other = TaskFactory(team=main_team, status="running")
    theirs = call(main_team, "set_todos", other, items=["their item"])["todos"][0]["id"]
    refused = call(ops, "complete_todo", mine, id=theirs)
    assert refused["success"] is False and refused["code"] == "TODO_NOT_FOUND"
    assert TaskTodo.objects.get(pk=theirs).done is False
    assert call(ops, "set_todos", mine, items=["mine"])["count"] == 1
    assert TaskTodo.objects.filter(task=other).count() == 1


@pytest.mark.django_db
def test_the_task_api_detail_shows_the_todos_scrubbed(api_client, ops):  # noqa: F811
    task = TaskFactory(team=ops, status="running")
    secret = "sk-todo-0123456789abcdefSECRET"
    scrubbing.remember([secret])
    try:
        ids = [t["id"] for t in call(ops, "set_todos", task, items=["Plan", "Build"])["todos"]]
        call(ops, "complete_todo", task, id=ids[0])
        call(ops, "add_todo", task, text=f"Rotate {secret}")
        body = api_client.get(f"/api/v1/tasks/{task.pk}").json()
    finally:
        scrubbing.invalidate()
    assert [(t["text"][:6], t["done"]) for t in body["todos"]] == [
        ("Plan", True),
        ("Build", False),
        ("Rotate", False),
    ]
    assert body["todos"][0]["completed_at"] and body["todos"][1]["completed_at"] is None
    assert secret not in str(body)
    assert api_client.get(f"/api/v1/tasks/{TaskFactory(team=ops).pk}").json()["todos"] == []


@pytest.mark.django_db
def test_the_admin_task_page_lists_the_todos_read_only(admin_client, ops):
    task = TaskFactory(team=ops, status="running")
    ids = [
        t["id"] for t in call(ops, "set_todos", task, items=["Check disk", "Page on-call"])["todos"]
    ]
    call(ops, "complete_todo", task, id=ids[1])
    page = admin_client.get(f"/admin/tasks/task/{task.pk}/change/").content.decode()
    assert "☐ 1. Check disk" in page and "☑ 2. Page on-call" in page
    assert "todos-0-text" not in page and "todos-TOTAL_FORMS" not in page  # shown, not a form


@pytest.mark.django_db(transaction=True)
def test_a_scripted_task_session_keeps_its_todo_list(main_team, scripted_provider):
    ops = team_spawn(parent=main_team, name="ops", description="Operations").team
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "tool_calls": [{"name": "set_todos", "arguments": {"items": ["Look", "Fix"]}}]
                },
            },
            {
                "when": {"last": "tool", "tool": "set_todos"},
                "reply": {"tool_calls": [{"name": "add_todo", "arguments": {"text": "Report"}}]},
            },
            {"when": {"last": "tool", "tool": "add_todo"}, "reply": {"content": "Planned."}},
        ]
    )
    task = task_enqueue(team=ops, text="investigate the outage")
    assert run_task(task.pk) == "done"
    assert list(TaskTodo.objects.filter(task=task).values_list("text", flat=True)) == [
        "Look",
        "Fix",
        "Report",
    ]
    assert ToolCall.objects.filter(tool__in=["set_todos", "add_todo"], success=True).count() == 2

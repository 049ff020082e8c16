"""A task's todo list: the session running the task replaces it, appends to it and ticks items
off. Bounded so a looping model cannot grow it without end."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from openhive.core.errors import DomainError, NotFound

from ..models import Task, TaskTodo

MAX_TODOS = 50
MAX_TODO_CHARS = 500


def _clean(text: str) -> str:
    cleaned = " ".join((text or "").split())
    if not cleaned:
        raise DomainError("a todo needs some text", code="invalid_todo")
    if len(cleaned) > MAX_TODO_CHARS:
        raise DomainError(
            f"a todo is at most {MAX_TODO_CHARS} characters (got {len(cleaned)}): shorten it",
            code="todo_too_long",
        )
    return cleaned


def _locked_task(task_id: int) -> Task:
    # The row lock serialises two tool calls of the same task on PostgreSQL (a no-op on SQLite,
    # whose writes are serialised anyway), so positions and the cap stay consistent.
    task = Task.objects.select_for_update().filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"task {task_id} not found")
    return task


@transaction.atomic
def todos_set(*, task_id: int, items: list[str]) -> list[TaskTodo]:
    """Replace the task's whole list (an empty list clears it)."""
    if len(items) > MAX_TODOS:
        raise DomainError(
            f"at most {MAX_TODOS} todos per task (got {len(items)}): merge or drop some",
            code="too_many_todos",
        )
    texts = [_clean(item) for item in items]  # every item is checked before anything changes
    task = _locked_task(task_id)
    TaskTodo.objects.filter(task=task).delete()
    return TaskTodo.objects.bulk_create(
        [TaskTodo(task=task, position=i, text=t) for i, t in enumerate(texts, start=1)]
    )


@transaction.atomic
def todo_add(*, task_id: int, text: str) -> TaskTodo:
    cleaned = _clean(text)
    task = _locked_task(task_id)
    count = TaskTodo.objects.filter(task=task).count()
    if count >= MAX_TODOS:
        raise DomainError(
            f"the task already has {MAX_TODOS} todos: complete or replace some (set_todos)",
            code="too_many_todos",
        )
    last = TaskTodo.objects.filter(task=task).aggregate(last=Max("position"))["last"] or 0
    return TaskTodo.objects.create(task=task, position=last + 1, text=cleaned)


@transaction.atomic
def todo_complete(*, task_id: int, todo_id: int) -> TaskTodo:
    """Mark one of the task's own todos done (again: a no-op)."""
    _locked_task(task_id)
    todo = TaskTodo.objects.filter(task_id=task_id, pk=todo_id).first()
    if todo is None:
        raise NotFound(
            f"todo {todo_id} is not on this task's list: use an id from set_todos or add_todo",
            code="todo_not_found",
        )
    if not todo.done:
        todo.done = True
        todo.completed_at = timezone.now()
        todo.save(update_fields=["done", "completed_at"])
    return todo

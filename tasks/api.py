"""REST: the task queue (/api/v1/tasks). Task text and results may quote secrets a team saw,
so both pass through the scrubber on the way out."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from openhive.core.api import Page, request_actor
from openhive.core.errors import NotFound
from openhive.core.scrubbing import scrub
from openhive.engine.schemas import SessionBrief, session_brief
from teams.selectors import team_get_or_404

from .models import Task, UserQuestion
from .orchestration import task_delegate, task_requeue
from .selectors import task_get, task_list, task_questions, task_sessions, task_todos, todo_dict
from .services import priority_from_name, task_cancel
from .services.waiting import MAX_ANSWER_CHARS, task_answer, task_decide_approval

router = Router(tags=["tasks"])

PriorityName = Literal["critical", "high", "normal", "low"]
# Far beyond any real queue, and small enough for every backend's OFFSET.
MAX_OFFSET = 1_000_000_000


# Inline enums: the schema names a Django choices class by its bare name, and "Type" (a task's)
# and "Type" (a trigger's) would be documented as one.
TaskStatus = Literal[tuple(Task.Status.values)]  # type: ignore[valid-type]
TaskType = Literal[tuple(Task.Type.values)]  # type: ignore[valid-type]


class TaskFilters(Schema):
    team: str | None = Field(None, min_length=1, max_length=64, description="team name")
    status: TaskStatus | None = None
    type: TaskType | None = None
    priority: PriorityName | None = None
    stop_reason: str | None = Field(None, max_length=20)
    limit: int = Field(50, ge=1, le=200)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)


class TaskOut(Schema):
    id: int
    team: str
    type: str
    priority: str
    status: str
    text: str
    result: str
    source_channel: str
    topic_id: int | None
    correlation_id: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    attempts: int
    stop_reason: str
    # Put back to wait for its model provider: not run before `run_after`, and why.
    run_after: datetime | None
    defer_count: int
    defer_reason: str


class TaskPage(Page):
    items: list[TaskOut]


class TodoOut(Schema):
    id: int
    position: int
    text: str
    done: bool
    completed_at: datetime | None


class QuestionOut(Schema):
    id: int
    kind: str
    state: str
    text: str
    options: list[str]
    tool: str
    arguments: dict
    created_at: datetime
    expires_at: datetime | None
    answer: str
    reason: str
    decided_by: str
    decided_via: str
    decided_at: datetime | None


class TaskDetailOut(TaskOut):
    created_by: str
    sessions: list[SessionBrief]
    # The working checklist the task's session keeps (set_todos, add_todo, complete_todo).
    todos: list[TodoOut]
    # What the task waits for now (a question, an approval), if anything; and every one it
    # asked, with who decided what and when.
    waiting: QuestionOut | None
    questions: list[QuestionOut]


def _question_out(q: UserQuestion) -> dict:
    return {
        "id": q.pk,
        "kind": q.kind,
        "state": q.state,
        "text": scrub(q.text),
        "options": list(q.options),
        "tool": q.tool,
        "arguments": q.arguments,
        "created_at": q.created_at,
        "expires_at": q.expires_at,
        "answer": scrub(q.answer),
        "reason": scrub(q.reason),
        "decided_by": q.decided_by,
        "decided_via": q.decided_via,
        "decided_at": q.decided_at,
    }


def _task_out(task: Task) -> dict:
    return {
        "id": task.pk,
        "team": task.team.name,
        "type": task.type,
        "priority": task.priority_name,
        "status": task.status,
        "text": scrub(task.text),
        "result": scrub(task.result),
        "source_channel": task.source_channel,
        "topic_id": task.topic_id,
        "correlation_id": task.correlation_id,
        "created_at": task.created_at,
        "started_at": task.started_at,
        "finished_at": task.finished_at,
        "duration_ms": task.duration_ms,
        "attempts": task.attempts,
        "stop_reason": task.stop_reason,
        "run_after": task.run_after,
        "defer_count": task.defer_count,
        "defer_reason": scrub(task.defer_reason),
    }


def _task_or_404(task_id: int) -> Task:
    task = task_get(task_id=task_id)
    if task is None:
        raise NotFound(f"task {task_id} not found")
    return task


@router.get("", response=TaskPage, summary="Tasks, newest first")
def tasks_list(request: HttpRequest, filters: Query[TaskFilters]) -> dict:
    rows = task_list(
        team=team_get_or_404(name=filters.team) if filters.team is not None else None,
        status=filters.status,
        type=filters.type,
        priority=priority_from_name(filters.priority) if filters.priority else None,
    )
    if filters.stop_reason is not None:
        rows = rows.filter(stop_reason=filters.stop_reason)
    page = rows[filters.offset : filters.offset + filters.limit]
    return {
        "count": rows.count(),
        "limit": filters.limit,
        "offset": filters.offset,
        "items": [_task_out(task) for task in page],
    }


@router.get("/{task_id}", response=TaskDetailOut, summary="One task with its sessions")
def tasks_detail(request: HttpRequest, task_id: int) -> dict:
    task = _task_or_404(task_id)
    questions = task_questions(task_id=task.pk)
    return {
        **_task_out(task),
        "created_by": task.created_by,
        "sessions": [session_brief(s) for s in task_sessions(task=task)],
        "todos": [todo_dict(t) for t in task_todos(task_id=task.pk)],
        "waiting": next((_question_out(q) for q in questions if q.state == "pending"), None),
        "questions": [_question_out(q) for q in questions],
    }


class AnswerIn(Schema):
    answer: str = Field(..., max_length=MAX_ANSWER_CHARS)


class ApprovalIn(Schema):
    decision: Literal["approve", "deny"]
    reason: str = Field("", max_length=2000)


@router.post(
    "/{task_id}/answer",
    response=TaskDetailOut,
    summary="Answer the question a task waits on (ask_user); the task resumes",
)
def tasks_answer(request: HttpRequest, task_id: int, payload: AnswerIn) -> dict:
    _task_or_404(task_id)
    task_answer(task_id=task_id, answer=payload.answer, by=request_actor(request), via="api")
    return tasks_detail(request, task_id)


@router.post(
    "/{task_id}/approval",
    response=TaskDetailOut,
    summary="Approve or deny the tool call a task waits on (require_approval)",
)
def tasks_approval(request: HttpRequest, task_id: int, payload: ApprovalIn) -> dict:
    _task_or_404(task_id)
    task_decide_approval(
        task_id=task_id,
        decision=payload.decision,
        reason=payload.reason,
        by=request_actor(request),
        via="api",
    )
    return tasks_detail(request, task_id)


@router.post("/{task_id}/cancel", response=TaskOut, summary="Cancel a pending or running task")
def tasks_cancel(request: HttpRequest, task_id: int) -> dict:
    _task_or_404(task_id)
    user = request_actor(request)
    task = task_cancel(task_id=task_id, reason=f"cancelled through the API by {user}")
    return _task_out(task)


class TaskIn(Schema):
    team: str = Field(..., min_length=1, max_length=64)
    text: str = Field(..., min_length=1, max_length=100_000)
    priority: PriorityName = "normal"
    overlap_policy: Literal["allow", "skip", "replace", "confirm"] = "allow"


class EnqueueOut(Schema):
    status: str
    task: TaskOut | None
    in_flight: list[dict]
    replaced_task_ids: list[int]


@router.post(
    "",
    response={201: EnqueueOut, 409: EnqueueOut},
    summary="Queue a task for a team (with an overlap policy)",
)
def tasks_enqueue(request: HttpRequest, payload: TaskIn) -> Status:
    team = team_get_or_404(name=payload.team)
    user = request_actor(request)
    outcome = task_delegate(
        team=team,
        text=payload.text,
        priority=priority_from_name(payload.priority),
        overlap_policy=payload.overlap_policy,
        created_by=f"api:{user}",
    )
    body = {
        "status": outcome.status,
        "task": _task_out(outcome.task) if outcome.task else None,
        "in_flight": outcome.in_flight,
        "replaced_task_ids": outcome.replaced,
    }
    # skipped / waiting for confirmation: nothing was queued, the caller must decide
    return Status(201 if outcome.task else 409, body)


@router.post(
    "/{task_id}/requeue",
    response={201: TaskOut},
    summary="Queue a failed or cancelled task again (as a new task)",
)
def tasks_requeue(request: HttpRequest, task_id: int) -> Status:
    _task_or_404(task_id)
    user = request_actor(request)
    task = task_requeue(task_id=task_id, requested_by=f"api:{user}")
    return Status(201, _task_out(Task.objects.select_related("team").get(pk=task.pk)))

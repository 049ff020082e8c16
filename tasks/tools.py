"""Task tools: delegate_task, list_completed_tasks, enqueue_parent_task, query_team,
query_teams, and the running task's todos (set_todos, add_todo, complete_todo)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.registry import tool
from teams.guards import child_team

from .models import Task
from .orchestration import task_delegate, task_handoff_to_parent
from .query import MAX_FAN_OUT, query_child, query_children
from .selectors import task_todos, todo_dict
from .services import (
    MAX_TODO_CHARS,
    MAX_TODOS,
    priority_from_name,
    todo_add,
    todo_complete,
    todos_set,
)

Priority = Literal["critical", "high", "normal", "low"]


class DelegateTaskArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="Name of one of your child teams")
    task: str = Field(min_length=1, description="The work, self-contained")
    priority: Priority = Field(default="normal")
    overlap_policy: Literal["allow", "skip", "replace", "confirm"] = Field(
        default="allow",
        description=(
            "If the team already has work in flight: allow = queue behind it, skip = drop "
            "this task, confirm = ask first (nothing queued), replace = cancel that work "
            "(stopping its session) and queue this"
        ),
    )


@tool(
    name="delegate_task",
    description=(
        "Queue a task for one of your child teams. Its result is sent to the conversation "
        "that asked for it when the team finishes."
    ),
    args=DelegateTaskArgs,
)
def delegate_task(ctx: ToolContext, args: DelegateTaskArgs) -> dict:
    target = child_team(ctx, args.team)
    outcome = task_delegate(
        team=target,
        text=args.task,
        priority=priority_from_name(args.priority),
        overlap_policy=args.overlap_policy,
        source_channel=ctx.source_channel,
        topic_id=ctx.topic_id,
        created_by=ctx.caller,
    )
    result: dict = {
        "status": outcome.status,
        "team": target.name,
        "priority": args.priority,
        "overlap_policy_applied": args.overlap_policy,
        "in_flight": outcome.in_flight,
    }
    if outcome.task is not None:
        result["task_id"] = outcome.task.pk
    if outcome.replaced:
        result["replaced_task_ids"] = outcome.replaced
    if outcome.status == "in_flight":
        result["requires_confirmation"] = True
        result["message"] = (
            f"Team {target.name} already has {len(outcome.in_flight)} task(s) in flight. "
            "Ask the user, then call again with overlap_policy allow (queue behind) or "
            "replace (cancel the current work)."
        )
    return result


class ListCompletedTasksArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(default="", description="Your own team (default) or one of your children")
    since: datetime | None = Field(default=None, description="ISO time; default 7 days ago")
    limit: int = Field(default=50, ge=1, le=200)


@tool(
    name="list_completed_tasks",
    description=(
        "Finished tasks (done, failed, cancelled) of your team or a child team, newest first, "
        "with a result snippet: evidence for reviews. For live queue state use get_status."
    ),
    args=ListCompletedTasksArgs,
)
def list_completed_tasks(ctx: ToolContext, args: ListCompletedTasksArgs) -> dict:
    team = ctx.team if not args.team or args.team == ctx.team.name else child_team(ctx, args.team)
    since = args.since or timezone.now() - timedelta(days=7)
    if timezone.is_naive(since):
        since = timezone.make_aware(since, timezone.utc)
    rows = (
        Task.objects.filter(
            team=team,
            status__in=[Task.Status.DONE, Task.Status.FAILED, Task.Status.CANCELLED],
            finished_at__gte=since,
        )
        .exclude(type=Task.Type.QUERY)
        .order_by("-finished_at", "-id")[: args.limit]
    )
    return {
        "team": team.name,
        "tasks": [
            {
                "task_id": t.pk,
                "type": t.type,
                "status": t.status,
                "stop_reason": t.stop_reason,
                "duration_ms": t.duration_ms,
                "result_snippet": t.result[:200],
                "created_at": t.created_at.isoformat(),
                "finished_at": t.finished_at.isoformat() if t.finished_at else None,
            }
            for t in rows
        ],
    }


class EnqueueParentTaskArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=20_000, description="What the parent should do")
    priority: Priority = Field(default="normal")
    context: str = Field(default="", max_length=20_000, description="Background for the parent")
    correlation_id: str = Field(
        default="", max_length=200, description="Your id for this handoff; repeats are dropped"
    )


@tool(
    name="enqueue_parent_task",
    description=(
        "Hand work to your parent team: the task enters its queue and its orchestrator "
        "decides how to route it. Capped per minute; a repeated correlation_id is dropped."
    ),
    args=EnqueueParentTaskArgs,
)
def enqueue_parent_task(ctx: ToolContext, args: EnqueueParentTaskArgs) -> dict:
    task = task_handoff_to_parent(
        child=ctx.team,
        text=args.task,
        priority=priority_from_name(args.priority),
        correlation_id=args.correlation_id,
        context=args.context,
        source_channel=ctx.source_channel,
        topic_id=ctx.topic_id,
        created_by=ctx.caller,
    )
    return {
        "status": "queued",
        "task_id": task.pk,
        "team": task.team.name,
        "correlation_id": task.correlation_id,
    }


def _timeout_ms(value: int | None) -> int:
    return value or settings.OPENHIVE["QUERY_TIMEOUT_MS"]


def _parent_cancelled(ctx: ToolContext):
    """When the calling session runs a task, the fan-out stops once that task stops running."""
    if ctx.task_id is None:
        return None
    task_id = ctx.task_id

    def cancelled() -> bool:
        return not Task.objects.filter(pk=task_id, status=Task.Status.RUNNING).exists()

    return cancelled


class QueryTeamArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="Name of one of your child teams")
    query: str = Field(min_length=1, max_length=20_000, description="The question")
    timeout_ms: int | None = Field(default=None, ge=100, le=3_600_000)


@tool(
    name="query_team",
    description=(
        "Ask one child team a question and wait for its answer (it runs a session now). "
        "For two or more teams use query_teams: they run in parallel."
    ),
    args=QueryTeamArgs,
)
def query_team(ctx: ToolContext, args: QueryTeamArgs) -> dict:
    child = child_team(ctx, args.team)
    outcome = query_child(
        child=child,
        query=args.query,
        caller=ctx.team.name,
        timeout_ms=_timeout_ms(args.timeout_ms),
        source_channel=ctx.source_channel,
        parent_cancelled=_parent_cancelled(ctx),
    )
    if not outcome.ok:
        raise DomainError(f"query_team failed: {outcome.result_or_error}", code="query_failed")
    return {"team": child.name, "response": outcome.result_or_error}


class QueryTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="Name of one of your child teams")
    query: str = Field(min_length=1, max_length=20_000)
    timeout_ms: int | None = Field(default=None, ge=100, le=3_600_000)


class QueryTeamsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    targets: list[QueryTarget] = Field(min_length=1, max_length=MAX_FAN_OUT)
    default_timeout_ms: int | None = Field(default=None, ge=100, le=3_600_000)


@tool(
    name="query_teams",
    description=(
        f"Ask up to {MAX_FAN_OUT} child teams in parallel and get each answer or error "
        "({team, ok, result_or_error}); one failure does not fail the others."
    ),
    args=QueryTeamsArgs,
)
def query_teams(ctx: ToolContext, args: QueryTeamsArgs) -> dict:
    names = [t.team for t in args.targets]
    if len(set(names)) != len(names):
        raise DomainError("each team may appear only once in targets", code="invalid_input")
    # Every target is checked before anything runs: a bad one runs none.
    children = [child_team(ctx, t.team) for t in args.targets]
    default = _timeout_ms(args.default_timeout_ms)
    outcomes = query_children(
        targets=[
            (child, t.query, t.timeout_ms or default)
            for child, t in zip(children, args.targets, strict=True)
        ],
        caller=ctx.team.name,
        source_channel=ctx.source_channel,
        parent_cancelled=_parent_cancelled(ctx),
    )
    return {
        "success": any(o.ok for o in outcomes),
        "results": [
            {"team": o.team, "ok": o.ok, "result_or_error": o.result_or_error} for o in outcomes
        ],
    }


# --- the running task's todo list -------------------------------------------------------------


def _own_task_id(ctx: ToolContext) -> int:
    if ctx.task_id is None:
        raise DomainError(
            "todos belong to a task, and this session runs none (a chat turn or a query): "
            "keep the plan in your reply, or delegate the work as a task",
            code="no_task",
        )
    return ctx.task_id


def _todo_list(task_id: int) -> dict:
    todos = [todo_dict(t) for t in task_todos(task_id=task_id)]
    return {
        "task_id": task_id,
        "todos": todos,
        "count": len(todos),
        "remaining": sum(1 for t in todos if not t["done"]),
    }


class SetTodosArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[str] = Field(
        max_length=MAX_TODOS,
        description=f"The whole list, in order (replaces it; [] clears); each at most "
        f"{MAX_TODO_CHARS} characters",
    )


@tool(
    name="set_todos",
    description=(
        "Write your plan for the current task as a todo list, replacing any previous list. "
        "The operator sees it on the task. Returns each todo with its id."
    ),
    args=SetTodosArgs,
)
def set_todos(ctx: ToolContext, args: SetTodosArgs) -> dict:
    task_id = _own_task_id(ctx)
    todos_set(task_id=task_id, items=args.items)
    return _todo_list(task_id)


class AddTodoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_TODO_CHARS, description="The new item")


@tool(
    name="add_todo",
    description="Append one item to the current task's todo list.",
    args=AddTodoArgs,
)
def add_todo(ctx: ToolContext, args: AddTodoArgs) -> dict:
    task_id = _own_task_id(ctx)
    todo = todo_add(task_id=task_id, text=args.text)
    return {"added": todo_dict(todo), **_todo_list(task_id)}


class CompleteTodoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=1, description="The todo's id, as set_todos or add_todo returned it")


@tool(
    name="complete_todo",
    description="Mark one item of the current task's todo list done.",
    args=CompleteTodoArgs,
)
def complete_todo(ctx: ToolContext, args: CompleteTodoArgs) -> dict:
    task_id = _own_task_id(ctx)
    todo = todo_complete(task_id=task_id, todo_id=args.id)
    return {"completed": todo_dict(todo), **_todo_list(task_id)}

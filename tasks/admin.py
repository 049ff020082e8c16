"""Back office for the task queue. Status and lease fields move only through the queue services
(claim, finish, cancel, reap), so they are read-only here; an operator can re-prioritise a task
or cancel it with the list action."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from openhive.core.errors import DomainError
from openhive.core.scrubbing import scrub

from .models import OrgOpLock, Task, TaskTodo
from .orchestration import task_requeue
from .services import task_cancel


class TaskTodoInline(admin.TabularInline):
    """The task's working checklist, as its session left it: read-only (only the session's
    tools write it)."""

    model = TaskTodo
    fields = ("position", "todo_text", "done", "completed_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "todos"

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="todo")
    def todo_text(self, obj: TaskTodo) -> str:
        return scrub(obj.text)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "team",
        "type",
        "priority",
        "status",
        "stop_reason",
        "created_at",
        "duration_ms",
    )
    list_filter = (
        "status",
        "type",
        "priority",
        "stop_reason",
        ("team", admin.RelatedOnlyFieldListFilter),
    )
    list_select_related = ("team",)
    search_fields = ("text", "correlation_id")
    date_hierarchy = "created_at"
    actions = ("cancel_tasks", "requeue_tasks")
    inlines = (TaskTodoInline,)
    fields = (
        "team",
        "type",
        "priority",
        "status",
        "task_text",
        "task_result",
        "options",
        "source_channel",
        "topic",
        "correlation_id",
        "created_by",
        "created_at",
        "dispatched_at",
        "started_at",
        "finished_at",
        "duration_ms",
        "lease_owner",
        "lease_expires_at",
        "attempts",
        "stop_reason",
    )
    readonly_fields = tuple(f for f in fields if f != "priority")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # New work enters through delegation (chat, API, `manage.py openhive delegate`).
        return False

    # A task may quote a secret it was given; the page never shows it.
    @admin.display(description="text")
    def task_text(self, obj: Task) -> str:
        return scrub(obj.text)

    @admin.display(description="result")
    def task_result(self, obj: Task) -> str:
        return scrub(obj.result)

    @admin.action(description="Cancel selected tasks", permissions=["change"])
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        cancelled, refused = 0, []
        user = request.user.get_username()
        for task_id in queryset.values_list("id", flat=True):
            try:
                task_cancel(task_id=task_id, reason=f"cancelled in the admin by {user}")
                cancelled += 1
            except DomainError as exc:
                refused.append(exc.message)
        if cancelled:
            self.message_user(request, f"Cancelled {cancelled} task(s).", messages.SUCCESS)
        if refused:
            self.message_user(request, "; ".join(refused), messages.WARNING)

    @admin.action(description="Requeue selected failed or cancelled tasks", permissions=["change"])
    def requeue_tasks(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        queued, refused = [], []
        user = request.user.get_username()
        for task_id in queryset.values_list("id", flat=True):
            try:
                queued.append(task_requeue(task_id=task_id, requested_by=f"admin:{user}").pk)
            except DomainError as exc:
                refused.append(exc.message)
        if queued:
            ids = ", ".join(f"#{pk}" for pk in queued)
            self.message_user(request, f"Queued again as {ids}.", messages.SUCCESS)
        if refused:
            self.message_user(request, "; ".join(refused), messages.WARNING)


@admin.register(TaskTodo)
class TaskTodoAdmin(admin.ModelAdmin):
    """Every task's todos, to search across them; read-only (the task's session writes them)."""

    list_display = ("task", "position", "todo_text", "done", "completed_at")
    list_filter = ("done",)
    list_select_related = ("task",)
    search_fields = ("text",)
    fields = ("task", "position", "todo_text", "done", "created_at", "completed_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="todo")
    def todo_text(self, obj: TaskTodo) -> str:
        return scrub(obj.text)


@admin.register(OrgOpLock)
class OrgOpLockAdmin(admin.ModelAdmin):
    """Org-op mutexes held right now. An expired one is ignored by the queue; deleting a live
    one releases the team early (only if its holder is known to be dead)."""

    list_display = ("team", "operation", "holder", "acquired_at", "expires_at")
    readonly_fields = ("team", "operation", "holder", "acquired_at", "expires_at")
    list_select_related = ("team",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

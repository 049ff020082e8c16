"""Back office for the task queue. Status and lease fields move only through the queue services
(claim, finish, cancel, reap), so they are read-only here; an operator can re-prioritise a task
or cancel it with the list action."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from openhive.errors import DomainError
from vault.scrubbing import scrub

from .models import Task
from .services import task_cancel


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "type", "priority", "status", "created_at", "duration_ms")
    list_filter = ("status", "type", "priority", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team",)
    search_fields = ("text", "correlation_id")
    date_hierarchy = "created_at"
    actions = ("cancel_tasks",)
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

"""Back office for the task queue. Status and lease fields move only through the queue services
(claim, finish, cancel, reap), so they are read-only here; an operator can re-prioritise a task
or cancel it with the list action."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from openhive.core.errors import DomainError
from openhive.core.scrubbing import scrub, scrub_data

from .models import OrgOpLock, Task, TaskTodo
from .orchestration import task_requeue
from .selectors import task_questions
from .services import task_cancel
from .story import FINISHED, task_story, task_title, task_tree, tree_root, tree_timeline

# How much of a task's text and result a list row shows.
LIST_CHARS = 90


def _short(text: str) -> str:
    text = " ".join(scrub(text).split())
    return text if len(text) <= LIST_CHARS else text[: LIST_CHARS - 1] + "…"


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "team",
        "type",
        "status",
        "short_text",
        "short_result",
        "created",
        "duration",
    )
    change_list_template = "admin/tasks/task/change_list.html"
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
    fields = (
        "team",
        "type",
        "priority",
        "status",
        "task_options",
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
        "todos",
    )
    readonly_fields = tuple(f for f in fields if f != "priority")

    # A read-only field, not an inline: an inline's formset would have to come back with
    # every save of the priority, and only the session's tools write todos.
    @admin.display(description="todos")
    def todos(self, task: Task) -> str:
        items = list(task.todos.all())
        if not items:
            return "-"
        return format_html_join(
            "\n",
            "<div>{} {}. {}</div>",
            ((("☑" if t.done else "☐"), t.position, scrub(t.text)) for t in items),
        )

    change_form_template = "admin/tasks/task/change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        # New work enters through delegation (chat, API, `manage.py openhive delegate`).
        return False

    def has_change_permission(self, request: HttpRequest, obj: Task | None = None) -> bool:
        # A finished task is history: its page has no save button and refuses a POST.
        if obj is not None and obj.status in FINISHED:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Task | None = None) -> bool:
        # History, like sessions and the audit: kept whole (its sessions point at it).
        if obj is not None and obj.status in FINISHED:
            return False
        return super().has_delete_permission(request, obj)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        task = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if task is not None:
            extra.update(
                title=task_title(task),
                subtitle=None,
                story=task_story(task),
                # A task may quote a secret it was given; the page never shows it.
                text=scrub(task.text),
                result=scrub(task.result),
                # What it asked a person, and who decided what (answer forms on open ones).
                questions=task_questions(task_id=task.pk),
            )
        return super().change_view(request, object_id, form_url, extra)

    def get_urls(self) -> list[URLPattern]:
        tree = path(
            "<int:task_id>/tree/",
            self.admin_site.admin_view(self.tree_view),
            name="tasks_task_tree",
        )
        return [tree, *super().get_urls()]

    def tree_view(self, request: HttpRequest, task_id: int) -> HttpResponse:
        """The whole tree the task belongs to, from its root, with a timeline of sessions."""
        task = get_object_or_404(Task.objects.select_related("team"), pk=task_id)
        root = tree_root(task)
        top, nodes = task_tree(root)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Tree of {task_title(root)}",
            "opts": self.model._meta,
            "task": task,
            "root": top,
            "nodes": nodes,
            "timeline": tree_timeline(nodes),
        }
        return TemplateResponse(request, "admin/tasks/task/tree.html", context)

    @admin.display(description="options")
    def task_options(self, obj: Task) -> str:
        shown = json.dumps(scrub_data(obj.options), indent=2, sort_keys=True, default=str)
        return format_html('<pre class="oh-code">{}</pre>', shown)

    @admin.display(description="text")
    def short_text(self, obj: Task) -> str:
        return _short(obj.text)

    @admin.display(description="result")
    def short_result(self, obj: Task) -> str:
        return _short(obj.result)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Task) -> str:
        return timezone.localtime(obj.created_at).strftime("%Y-%m-%d %H:%M")

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj: Task) -> str:
        if obj.duration_ms is None:
            return "-"
        return f"{obj.duration_ms / 1000:.1f} s"

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


from . import admin_waiting  # noqa: E402,F401  (the waiting-for-a-person pages)

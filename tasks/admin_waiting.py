"""Back office for tasks waiting for a person: every question and approval request, read-only
(the record of who decided what, when and why), with an answer form on the pending ones (on
their page, the task's page and the admin dashboard). The form goes through the same services
as the API and the chat."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from openhive.core.errors import DomainError
from openhive.core.scrubbing import scrub

from .models import UserQuestion
from .services.waiting import task_answer, task_decide_approval


@admin.register(UserQuestion)
class UserQuestionAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "task_link", "kind", "state", "asked", "created_at", "decided")
    list_filter = ("state", "kind", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team", "task")
    search_fields = ("text", "tool", "answer", "decided_by")
    change_form_template = "admin/tasks/userquestion/change_form.html"
    fields = (
        "team",
        "task_link",
        "session",
        "kind",
        "state",
        "asked",
        "options",
        "shown_arguments",
        "channel_id",
        "topic",
        "created_at",
        "expires_at",
        "default_answer",
        "answer",
        "reason",
        "decided_by",
        "decided_via",
        "decided_at",
        "resumed_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # the audit of every decision is kept whole

    @admin.display(description="task")
    def task_link(self, obj: UserQuestion) -> str:
        url = reverse("admin:tasks_task_change", args=[obj.task_id])
        return format_html('<a href="{}">Task #{}</a>', url, obj.task_id)

    @admin.display(description="question or call")
    def asked(self, obj: UserQuestion) -> str:
        if obj.kind == UserQuestion.Kind.QUESTION:
            return scrub(obj.text)
        return f"approve {obj.tool}"

    @admin.display(description="arguments")
    def shown_arguments(self, obj: UserQuestion) -> str:
        shown = json.dumps(obj.arguments, indent=2, sort_keys=True, ensure_ascii=False)
        return format_html('<pre class="oh-code">{}</pre>', scrub(shown))

    @admin.display(description="decided")
    def decided(self, obj: UserQuestion) -> str:
        if obj.decided_at is None:
            return "-"
        return f"{obj.decided_by} ({obj.decided_via})"

    def get_urls(self) -> list[URLPattern]:
        decide = path(
            "<int:question_id>/decide/",
            self.admin_site.admin_view(require_POST(self.decide_view)),
            name="tasks_userquestion_decide",
        )
        return [decide, *super().get_urls()]

    def decide_view(self, request: HttpRequest, question_id: int) -> HttpResponse:
        """Answer, approve or deny from a form; a refusal (not waiting, not an option) is
        shown as a message and changes nothing."""
        question = get_object_or_404(UserQuestion, pk=question_id)
        user = f"admin:{request.user.get_username()}"
        decision = request.POST.get("decision", "")
        try:
            if question.state != UserQuestion.State.PENDING:
                raise DomainError(f"this {question.kind} is already {question.state}")
            if question.kind == UserQuestion.Kind.QUESTION:
                task_answer(
                    task_id=question.task_id,
                    answer=request.POST.get("answer", ""),
                    by=user,
                    via="admin",
                )
                done = "Answered"
            else:
                task_decide_approval(
                    task_id=question.task_id,
                    decision=decision,
                    reason=request.POST.get("reason", ""),
                    by=user,
                    via="admin",
                )
                done = "Approved" if decision == "approve" else "Denied"
            self.message_user(
                request, f"{done}: task #{question.task_id} goes on.", messages.SUCCESS
            )
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        back = request.POST.get("next") or request.META.get("HTTP_REFERER", "")
        if not url_has_allowed_host_and_scheme(back, {request.get_host()}):
            back = reverse("admin:tasks_userquestion_change", args=[question_id])
        return HttpResponseRedirect(back)

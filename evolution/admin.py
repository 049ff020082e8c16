"""Back office for learning and reflection: the runs (skipped ones with their reason), the
learnings with their confidence, and the history of every change with its evidence. Nothing is
edited by hand: changes move only through the confirm, reject and revert actions, which call
the same services as the tools and the API."""

from __future__ import annotations

import difflib

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from openhive.core.errors import DomainError
from openhive.core.scrubbing import scrub

from .models import CycleChange, CycleRun, Learning
from .services.changes import change_confirm, change_reject, change_revert


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(CycleRun)
class CycleRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "team", "subagent", "kind", "outcome", "reason", "task", "created_at")
    list_filter = ("kind", "outcome", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team", "task")
    search_fields = ("subagent", "reason", "team__name")


@admin.register(Learning)
class LearningAdmin(ReadOnlyAdmin):
    list_display = ("id", "team", "subagent", "topic", "confidence", "status", "corroborations")
    list_filter = ("confidence", "status", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team",)
    search_fields = ("topic", "insight", "subagent", "team__name")


@admin.register(CycleChange)
class CycleChangeAdmin(ReadOnlyAdmin):
    list_display = ("id", "team", "subagent", "kind", "target", "identity", "status", "created_at")
    list_filter = ("kind", "status", "identity", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team",)
    search_fields = ("target", "reason", "subagent", "team__name")
    actions = ("confirm_changes", "reject_changes", "revert_changes")
    # The change's own page offers the decisions its status allows, as buttons.
    change_form_template = "admin/evolution/cyclechange/change_form.html"
    fields = (
        "team",
        "subagent",
        "kind",
        "cycle_run",
        "target_type",
        "target",
        "identity",
        "status",
        "shown_reason",
        "evidence",
        "diff",
        "created_at",
        "decided_at",
        "decided_by",
        "reverted_at",
        "reverted_by",
    )
    readonly_fields = fields

    @admin.display(description="reason")
    def shown_reason(self, obj: CycleChange) -> str:
        return scrub(obj.reason)

    @admin.display(description="before → after")
    def diff(self, obj: CycleChange) -> str:
        lines = difflib.unified_diff(
            scrub(obj.before or "").splitlines(),
            scrub(obj.after).splitlines(),
            "before" if obj.before is not None else "(none)",
            "after",
            lineterm="",
        )
        return format_html("<pre>{}</pre>", "\n".join(lines))

    def get_urls(self):
        decide = self.admin_site.admin_view(require_POST(self.decide_view))
        own = [
            path(
                "<int:change_id>/decide/<str:verb>/",
                decide,
                name="evolution_cyclechange_decide",
            )
        ]
        return own + super().get_urls()

    def decide_view(self, request: HttpRequest, change_id: int, verb: str):
        funcs = {"confirm": (change_confirm, "Applied"), "reject": (change_reject, "Rejected"),
                 "revert": (change_revert, "Reverted")}  # fmt: skip
        if verb not in funcs or not self.has_view_permission(request):
            raise Http404
        get_object_or_404(CycleChange, pk=change_id)
        func, done = funcs[verb]
        self._decide(request, CycleChange.objects.filter(pk=change_id), func, done)
        return HttpResponseRedirect(reverse("admin:evolution_cyclechange_change", args=[change_id]))

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict | None = None):  # fmt: skip
        change = CycleChange.objects.filter(pk=object_id).first()
        allowed = {
            CycleChange.Status.PROPOSED: ["confirm", "reject"],
            CycleChange.Status.APPLIED: ["revert"],
        }.get(change.status if change else "", [])
        context = {**(extra_context or {}), "decisions": allowed}
        return super().change_view(request, object_id, form_url, extra_context=context)

    def _decide(self, request: HttpRequest, queryset: QuerySet, func, verb: str) -> None:
        done = 0
        for change in queryset:
            try:
                func(change_id=change.pk, by=f"admin:{request.user.get_username()}")
                done += 1
            except DomainError as exc:
                self.message_user(request, f"#{change.pk}: {exc.message}", messages.ERROR)
        if done:
            self.message_user(request, f"{verb} {done} change(s)", messages.SUCCESS)

    @admin.action(description="Confirm (apply) the proposed changes")
    def confirm_changes(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._decide(request, queryset, change_confirm, "Applied")

    @admin.action(description="Reject the proposed changes")
    def reject_changes(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._decide(request, queryset, change_reject, "Rejected")

    @admin.action(description="Revert the applied changes (restore the previous content)")
    def revert_changes(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._decide(request, queryset, change_revert, "Reverted")

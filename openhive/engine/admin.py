"""Back office for sessions and the tool-call audit (read-only records), plus a read-only page
of the provider profiles (their keys are never shown)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from openhive.core.admin import ReadOnlyAdmin, ReadOnlyInline
from openhive.core.errors import ProviderNotConfigured
from openhive.core.scrubbing import scrub

from .models import EngineLease, LlmExchange, Session, ToolCall, WorkerBeat
from .providers import list_profiles, provider_problems, providers_file
from .transcript import session_transcript


class LlmExchangeInline(ReadOnlyInline):
    model = LlmExchange
    fields = (
        "turn",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "latency_ms",
        "created_at",
    )


class ToolCallInline(ReadOnlyInline):
    model = ToolCall
    fields = ("tool", "success", "error", "duration_ms", "created_at")


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "team",
        "kind",
        "agent_name",
        "stop_reason",
        "task_number",
        "turns",
        "tokens",
        "cost",
        "started",
    )
    list_filter = ("kind", "stop_reason", "team")
    change_list_template = "admin/openhive/wide_change_list.html"
    list_select_related = ("team",)
    search_fields = ("team__name", "agent_name", "model", "provider_profile")
    date_hierarchy = "started_at"
    fields = (
        "team",
        "task",
        "topic",
        "kind",
        "agent_name",
        "model",
        "provider_profile",
        "stop_reason",
        "error_text",
        "final",
        "turns",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "started_at",
        "finished_at",
    )
    readonly_fields = ("error_text", "final")
    inlines = (LlmExchangeInline, ToolCallInline)
    change_form_template = "admin/engine/session/change_form.html"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        session = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if session is not None:
            children = (
                Session.objects.filter(parent_session=session)
                .select_related("team", "task")
                .order_by("started_at", "id")
            )
            extra.update(
                title=str(session),
                subtitle=None,
                transcript=session_transcript(session),
                child_sessions=list(children),
                parent_session=session.parent_session,
                error_shown=scrub(session.error),
                duration_ms=(
                    int((session.finished_at - session.started_at).total_seconds() * 1000)
                    if session.finished_at
                    else None
                ),
            )
        return super().change_view(request, object_id, form_url, extra)

    def get_queryset(self, request: HttpRequest):
        return (
            super()
            .get_queryset(request)
            .select_related("team", "task__team", "parent_session__team")
        )

    @admin.display(description="tokens")
    def tokens(self, obj: Session) -> int:
        return obj.prompt_tokens + obj.completion_tokens

    @admin.display(description="task", ordering="task_id")
    def task_number(self, obj: Session) -> str:
        return f"#{obj.task_id}" if obj.task_id else "-"

    @admin.display(description="cost", ordering="cost_usd")
    def cost(self, obj: Session) -> str:
        return f"${obj.cost_usd:.4f}"

    @admin.display(description="started", ordering="started_at")
    def started(self, obj: Session) -> str:
        return timezone.localtime(obj.started_at).strftime("%Y-%m-%d %H:%M:%S")

    # Stored text is scrubbed when written; scrub again so a secret added later is hidden too.
    @admin.display(description="error")
    def error_text(self, obj: Session) -> str:
        return scrub(obj.error)

    @admin.display(description="final text")
    def final(self, obj: Session) -> str:
        return scrub(obj.final_text)


@admin.register(LlmExchange)
class LlmExchangeAdmin(ReadOnlyAdmin):
    list_display = (
        "session_number",
        "turn",
        "kind",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
    )
    change_list_template = "admin/openhive/wide_change_list.html"

    @admin.display(description="session", ordering="session_id")
    def session_number(self, obj: LlmExchange) -> str:
        return f"#{obj.session_id}"

    list_filter = ("finish_reason",)
    list_select_related = ("session",)
    search_fields = ("request_digest",)


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ("team_name", "tool", "success", "duration_ms", "created", "session_number")
    list_filter = ("tool", "success")
    change_list_template = "admin/openhive/wide_change_list.html"

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: ToolCall) -> str:
        return timezone.localtime(obj.created_at).strftime("%Y-%m-%d %H:%M:%S")

    @admin.display(description="session", ordering="session_id")
    def session_number(self, obj: ToolCall) -> str:
        return f"#{obj.session_id}" if obj.session_id else "-"

    search_fields = ("team_name", "tool", "error")
    date_hierarchy = "created_at"


@admin.register(EngineLease)
class EngineLeaseAdmin(ReadOnlyAdmin):
    list_display = ("name", "holder", "acquired_at", "expires_at")


@admin.register(WorkerBeat)
class WorkerBeatAdmin(ReadOnlyAdmin):
    list_display = ("name", "threads", "busy", "started_at", "seen_at")


# Provider profiles live in a YAML file, not a table: one read-only page, linked from the
# engine section of the admin index.


def providers_view(request: HttpRequest) -> HttpResponse:
    error = ""
    try:
        profiles = [profile.describe() for profile in list_profiles()]
    except ProviderNotConfigured as exc:
        profiles, error = [], scrub(exc.message)
    context = {
        **admin.site.each_context(request),
        "title": "Provider profiles",
        "profiles": profiles,
        "error": error,
        "problems": [] if error else [scrub(p) for p in provider_problems()],
        "providers_file": providers_file(),
    }
    return TemplateResponse(request, "admin/engine/providers.html", context)


def _install_provider_page(site: admin.AdminSite) -> None:
    get_urls = site.get_urls
    get_app_list = site.get_app_list

    def urls() -> list[URLPattern]:
        page = path("providers/", site.admin_view(providers_view), name="providers")
        return [page, *get_urls()]

    def app_list(request: HttpRequest, app_label: str | None = None) -> list[dict]:
        apps = get_app_list(request, app_label)
        for app in apps:
            if app["app_label"] == "engine":
                app["models"].append(
                    {
                        "name": "Provider profiles",
                        "object_name": "ProviderProfile",
                        "perms": {"view": True},
                        "admin_url": reverse("admin:providers", current_app=site.name),
                        "add_url": None,
                        "view_only": True,
                    }
                )
        return apps

    site.get_urls = urls  # type: ignore[method-assign]
    site.get_app_list = app_list  # type: ignore[method-assign]


_install_provider_page(admin.site)

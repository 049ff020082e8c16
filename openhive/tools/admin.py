"""Back office of the reach tools: recent file writes and fetches per team (from the tool-call
audit, already scrubbed), the state of the rate-limit buckets, and the teams' plugins (source,
hash, state; deprecate, remove and verify actions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from openhive.core.admin import ReadOnlyAdmin
from openhive.core.errors import DomainError
from openhive.engine.models import ToolCall

from .models import Plugin, RateLimitBucket, ReachCall
from .plugins.selectors import plugin_file
from .plugins.services import plugin_deprecate, plugin_remove, plugin_verify, source_hash
from .selectors import reach_calls, reach_summary


class TeamNameFilter(admin.SimpleListFilter):
    title = "team"
    parameter_name = "team_name"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = reach_calls().values_list("team_name", flat=True).distinct().order_by("team_name")
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        return queryset.filter(team_name=self.value()) if self.value() else queryset


@admin.register(ReachCall)
class ReachCallAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "team_name", "tool", "target", "outcome", "duration_ms")
    list_filter = (TeamNameFilter, "tool", "success")
    date_hierarchy = "created_at"
    fields = (
        "created_at",
        "team_name",
        "session",
        "tool",
        "success",
        "error",
        "arguments",
        "result",
        "duration_ms",
    )
    list_select_related = ("session",)

    def get_queryset(self, request: HttpRequest) -> Any:
        return reach_calls()

    @admin.display(description="path or URL")
    def target(self, obj: ReachCall) -> str:
        args = obj.arguments or {}
        return str(args.get("path") or args.get("url") or "")[:200]

    @admin.display(description="outcome")
    def outcome(self, obj: ReachCall) -> str:
        result = obj.result or {}
        if not obj.success:
            return f"{result.get('code', 'failed')}: {obj.error[:120]}"
        if obj.tool == "web_fetch":
            cut = ", truncated" if result.get("truncated") else ""
            return f"HTTP {result.get('status')}, {result.get('bytes', 0)} bytes{cut}"
        if "bytes" in result:
            return f"{result['bytes']} bytes written"
        return f"{result.get('replacements', 0)} replacement(s)"

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        since = timezone.now() - timedelta(hours=24)
        extra = {"reach_summary": reach_summary(since=since)}
        return super().changelist_view(request, {**(extra_context or {}), **extra})


@admin.register(RateLimitBucket)
class RateLimitBucketAdmin(ReadOnlyAdmin):
    list_display = ("team", "key", "tokens_left", "refilled")
    list_filter = ("team",)
    list_select_related = ("team",)

    @admin.display(description="tokens at last use")
    def tokens_left(self, obj: RateLimitBucket) -> str:
        return f"{obj.tokens:.2f}"

    @admin.display(description="last used")
    def refilled(self, obj: RateLimitBucket) -> Any:
        return datetime.fromtimestamp(obj.refilled_at, tz=UTC)


class PluginActionForm(ActionForm):
    reason = forms.CharField(
        required=False, label="Reason (to deprecate)", widget=forms.TextInput(attrs={"size": 40})
    )


@admin.register(Plugin)
class PluginAdmin(ReadOnlyAdmin):
    """Every plugin row (removed ones stay, for the audit trail). Source, hash and state are
    shown as stored; the actions go through the same services as everywhere else."""

    list_display = ("offered", "team", "status", "version", "short_hash", "verified_at")
    list_filter = ("status", "team")
    search_fields = ("tool_name", "team__name", "source_hash")
    list_select_related = ("team",)
    action_form = PluginActionForm
    actions = ("deprecate", "remove", "verify")
    fields = (
        "team",
        "tool_name",
        "status",
        "status_reason",
        "status_changed_by",
        "status_changed_at",
        "version",
        "description",
        "parameters",
        "source_path",
        "source_hash",
        "file_check",
        "source",
        "registered_by",
        "verified_at",
        "recent_calls",
        "created_at",
        "updated_at",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        return self.fields

    @admin.display(description="tool", ordering="tool_name")
    def offered(self, obj: Plugin) -> str:
        return obj.offered_name

    @admin.display(description="SHA-256")
    def short_hash(self, obj: Plugin) -> str:
        return obj.source_hash[:12]

    @admin.display(description="file on disk")
    def file_check(self, obj: Plugin) -> str:
        data = self._file(obj)
        if data is None:
            return "missing"
        return "matches the hash" if source_hash(data) == obj.source_hash else "CHANGED"

    @admin.display(description="source")
    def source(self, obj: Plugin) -> Any:
        data = self._file(obj)
        if data is None:
            return "(the file is not on disk)"
        return format_html("<pre style='max-height:40em;overflow:auto'>{}</pre>", data.decode())

    @admin.display(description="recent calls (audit)")
    def recent_calls(self, obj: Plugin) -> Any:
        calls = ToolCall.objects.filter(team_id=obj.team_id, tool=obj.offered_name)[:10]
        lines = [
            f"{c.created_at:%Y-%m-%d %H:%M:%S} {'ok' if c.success else 'failed'} "
            f"{str((c.result or {}).get('code_sha256', ''))[:12]} {c.error[:100]}"
            for c in calls
        ]
        return format_html("<pre>{}</pre>", "\n".join(lines) or "none")

    def _file(self, obj: Plugin) -> bytes | None:
        return plugin_file(obj)

    def _each(self, request: HttpRequest, queryset: QuerySet[Plugin], action: Any) -> None:
        for plugin in queryset:
            try:
                done = action(plugin)
            except DomainError as exc:
                self.message_user(request, f"{plugin.offered_name}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"{done.offered_name} ({done.team.name}): {done.status}")

    @admin.action(description="Deprecate (stop offering; give a reason)")
    def deprecate(self, request: HttpRequest, queryset: QuerySet[Plugin]) -> None:
        reason = request.POST.get("reason", "")
        by = request.user.get_username() or "operator"
        self._each(request, queryset, lambda p: plugin_deprecate(plugin=p, reason=reason, by=by))

    @admin.action(description="Remove (delete the file, keep the row; deprecate first)")
    def remove(self, request: HttpRequest, queryset: QuerySet[Plugin]) -> None:
        by = request.user.get_username() or "operator"
        self._each(request, queryset, lambda p: plugin_remove(plugin=p, by=by))

    @admin.action(description="Verify (check the file against its hash)")
    def verify(self, request: HttpRequest, queryset: QuerySet[Plugin]) -> None:
        self._each(request, queryset, lambda p: plugin_verify(plugin=p))

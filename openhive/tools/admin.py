"""Back office of the reach tools: recent file writes and fetches per team (from the tool-call
audit, already scrubbed), the state of the rate-limit buckets, and each team's MCP servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone

from openhive.core.admin import ReadOnlyAdmin

from .models import McpServerStatus, RateLimitBucket, ReachCall
from .selectors import mcp_statuses, reach_calls, reach_summary


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


@admin.register(McpServerStatus)
class McpServerStatusAdmin(ReadOnlyAdmin):
    """Each team's MCP servers as the workers last saw them: state, tools, last error (all
    scrubbed before they were stored)."""

    list_display = ("team", "server", "transport", "state", "tool_count", "error", "updated_at")
    list_filter = ("state", "transport", "team")
    search_fields = ("server", "team__name")
    fields = (
        "team",
        "server",
        "transport",
        "state",
        "tool_names",
        "last_error",
        "failures",
        "pid",
        "updated_at",
    )

    def get_queryset(self, request: HttpRequest) -> Any:
        return mcp_statuses()

    @admin.display(description="tools")
    def tool_count(self, obj: McpServerStatus) -> int:
        return len(obj.tools or [])

    @admin.display(description="tools offered (as mcp__server__tool)")
    def tool_names(self, obj: McpServerStatus) -> str:
        return ", ".join(f"mcp__{obj.server}__{t.get('name')}" for t in obj.tools or []) or "-"

    @admin.display(description="last error")
    def error(self, obj: McpServerStatus) -> str:
        return obj.last_error[:160] or "-"

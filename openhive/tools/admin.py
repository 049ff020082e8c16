"""Back office of the reach tools: recent file writes, fetches and browser actions per team
(from the tool-call audit, already scrubbed; a browser screenshot is shown on its row) and the
state of the rate-limit buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from openhive.core.admin import ReadOnlyAdmin

from .models import RateLimitBucket, ReachCall
from .selectors import reach_calls, reach_summary, screenshot_data


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
        "screenshot",
    )
    readonly_fields = ("screenshot",)
    list_select_related = ("session",)

    def get_queryset(self, request: HttpRequest) -> Any:
        return reach_calls()

    @admin.display(description="path or URL")
    def target(self, obj: ReachCall) -> str:
        args = obj.arguments or {}
        result = obj.result or {}
        return str(args.get("path") or args.get("url") or result.get("url") or "")[:200]

    @admin.display(description="outcome")
    def outcome(self, obj: ReachCall) -> str:
        result = obj.result or {}
        if not obj.success:
            return f"{result.get('code', 'failed')}: {obj.error[:120]}"
        if obj.tool.startswith("browser_"):
            shown = result.get("path") or result.get("title") or ""
            refused = len(result.get("blocked_requests") or [])
            return f"{shown}" + (f" ({refused} request(s) refused)" if refused else "")
        if obj.tool == "web_fetch":
            cut = ", truncated" if result.get("truncated") else ""
            return f"HTTP {result.get('status')}, {result.get('bytes', 0)} bytes{cut}"
        if "bytes" in result:
            return f"{result['bytes']} bytes written"
        return f"{result.get('replacements', 0)} replacement(s)"

    @admin.display(description="screenshot")
    def screenshot(self, obj: ReachCall) -> str:
        image = screenshot_data(obj)
        if image is None:
            return "-"
        return format_html(
            '<img src="data:image/png;base64,{}" alt="screenshot" style="max-width: 100%">', image
        )

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

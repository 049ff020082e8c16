"""Back office for the team rows. Teams are created and shut down by the org services (spawn
and shutdown scaffold and remove workspaces), so the admin edits descriptions and scope
keywords only; adding or deleting a row here would leave the workspace behind."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from openhive.core.errors import DomainError
from openhive.tools.selectors import team_mcp_servers
from tasks.selectors import team_status
from teams.admin import ScopeKeywordInline
from teams.config import team_config_problem
from teams.models import MAIN_TEAM, Team
from teams.selectors import PENDING
from teams.skills import skills_summary

from .selectors import team_page
from .services import team_shutdown


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "parent",
        "status",
        "bootstrapped",
        "keyword_list",
        "pending_tasks",
        "created",
    )
    list_filter = ("status", "bootstrapped", ("parent", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "description", "scope_keywords__keyword")
    fields = (
        "name",
        "parent",
        "description",
        "status",
        "bootstrapped",
        "config_problem",
        "skills",
        "created_at",
        "updated_at",
    )
    readonly_fields = (
        "name",
        "parent",
        "status",
        "bootstrapped",
        "config_problem",
        "skills",
        "created_at",
        "updated_at",
    )
    inlines = (ScopeKeywordInline,)
    actions = ("shutdown_teams",)
    change_list_template = "admin/teams/team/change_list.html"
    change_form_template = "admin/teams/team/change_form.html"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        team = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if team is not None:
            page = team_page(team)
            configured = list(page["config"].mcp_servers) if page["config"] else []
            page["mcp_servers"] = team_mcp_servers(team_id=team.pk, configured=configured)
            extra.update(title=f"Team {team.name}", subtitle=None, page=page)
        return super().change_view(request, object_id, form_url, extra)

    @admin.display(description="config.yaml")
    def config_problem(self, team: Team) -> str:
        return team_config_problem(team.name) or "valid"

    @admin.display(description="skills")
    def skills(self, team: Team) -> SafeString | str:
        """Read-only: each skill's index line, and what to fix in the ones that do not load."""
        summary = skills_summary(team.name)
        if not summary["skills"] and not summary["problems"]:
            return "none"
        loaded = format_html_join(
            "",
            "<li>{} — {}{}</li>",
            ((s["name"], s["description"], _warned(s)) for s in summary["skills"]),
        )
        broken = format_html_join(
            "",
            '<li class="errornote">{}: {}</li>',
            ((p["path"], p["error"]) for p in summary["problems"]),
        )
        return format_html("<ul>{}{}</ul>", loaded, broken)

    def get_urls(self):
        tree = path("tree/", self.admin_site.admin_view(self.org_tree_view), name="teams_org_tree")
        return [tree, *super().get_urls()]

    def org_tree_view(self, request: HttpRequest) -> HttpResponse:
        """The whole org tree with each team's live queue state."""
        main = Team.objects.filter(name=MAIN_TEAM).first()
        rows: list[dict] = []

        def walk(team: Team, depth: int, seen: set[int]) -> None:
            rows.append({**team_status(team), "team": team, "depth": depth, "indent": depth * 24})
            for child in team.children.order_by("name"):
                if child.pk not in seen:
                    walk(child, depth + 1, seen | {child.pk})

        if main is not None:
            walk(main, 0, {main.pk})
        context = {
            **self.admin_site.each_context(request),
            "title": "Org tree",
            "rows": rows,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/teams/org_tree.html", context)

    @admin.action(
        description="Shut down selected teams (and their descendants)", permissions=["change"]
    )
    def shutdown_teams(self, request: HttpRequest, queryset: QuerySet[Team]) -> None:
        removed: list[str] = []
        refused: list[str] = []
        for name in queryset.values_list("name", flat=True):
            team = Team.objects.filter(name=name).first()
            if team is None:  # already removed with an ancestor selected beside it
                continue
            try:
                removed += team_shutdown(team=team, cascade=True)
            except DomainError as exc:
                refused.append(exc.message)
        if removed:
            self.message_user(request, f"Shut down: {', '.join(removed)}.", messages.SUCCESS)
        if refused:
            self.message_user(request, "; ".join(refused), messages.WARNING)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return (
            super()
            .get_queryset(request)
            .select_related("parent")
            .prefetch_related("scope_keywords")
            .annotate(pending=PENDING)
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="keywords")
    def keyword_list(self, obj: Team) -> str:
        return ", ".join(k.keyword for k in obj.scope_keywords.all())

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Team) -> str:
        return timezone.localtime(obj.created_at).strftime("%Y-%m-%d %H:%M")

    @admin.display(description="pending tasks", ordering="pending")
    def pending_tasks(self, obj: Team) -> int:
        return obj.pending


def _warned(skill: dict) -> str:
    return f" (warning: {'; '.join(skill['warnings'])})" if skill["warnings"] else ""

"""Back office for the org tree. Teams are created and shut down by the services (spawn and
shutdown scaffold and remove workspaces), so the admin edits descriptions and scope keywords
only; adding or deleting a row here would leave the workspace behind."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest

from tasks.models import Task

from .models import ScopeKeyword, Team


class ScopeKeywordForm(forms.ModelForm):
    class Meta:
        model = ScopeKeyword
        fields = ("keyword",)

    def clean_keyword(self) -> str:
        # Routing matches keywords in lowercase; store them that way.
        return self.cleaned_data["keyword"].strip().lower()


class ScopeKeywordInline(admin.TabularInline):
    model = ScopeKeyword
    form = ScopeKeywordForm
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "parent",
        "status",
        "bootstrapped",
        "keyword_list",
        "pending_tasks",
        "created_at",
    )
    list_filter = ("status", "bootstrapped", ("parent", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "description", "scope_keywords__keyword")
    fields = ("name", "parent", "description", "status", "bootstrapped", "created_at", "updated_at")
    readonly_fields = ("name", "parent", "status", "bootstrapped", "created_at", "updated_at")
    inlines = (ScopeKeywordInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return (
            super()
            .get_queryset(request)
            .select_related("parent")
            .prefetch_related("scope_keywords")
            .annotate(pending=Count("tasks", filter=Q(tasks__status=Task.Status.PENDING)))
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="keywords")
    def keyword_list(self, obj: Team) -> str:
        return ", ".join(k.keyword for k in obj.scope_keywords.all())

    @admin.display(description="pending tasks", ordering="pending")
    def pending_tasks(self, obj: Team) -> int:
        return obj.pending


@admin.register(ScopeKeyword)
class ScopeKeywordAdmin(admin.ModelAdmin):
    form = ScopeKeywordForm
    list_display = ("keyword", "team")
    list_filter = (("team", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("keyword", "team__name")
    list_select_related = ("team",)
    fields = ("team", "keyword")

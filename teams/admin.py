"""Back office for the tree as data: scope keywords and the messages between teams. The team
rows themselves are managed in `openhive.org.admin` (spawn and shutdown are org use cases)."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from openhive.core.admin import NoEditAdmin
from openhive.core.scrubbing import scrub

from .models import ScopeKeyword, TeamMessage


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


@admin.register(ScopeKeyword)
class ScopeKeywordAdmin(admin.ModelAdmin):
    form = ScopeKeywordForm
    list_display = ("keyword", "team")
    list_filter = (("team", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("keyword", "team__name")
    list_select_related = ("team",)
    fields = ("team", "keyword")


@admin.register(TeamMessage)
class TeamMessageAdmin(NoEditAdmin):
    """Messages and escalations between teams: what each team was told, and when it saw it."""

    list_display = (
        "id",
        "sender",
        "recipient",
        "kind",
        "short_content",
        "created_at",
        "delivered_at",
    )
    list_filter = ("kind", ("recipient", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("sender", "recipient")
    search_fields = ("content", "correlation_id")
    fields = (
        "sender",
        "recipient",
        "kind",
        "message",
        "reason",
        "correlation_id",
        "created_at",
        "delivered_at",
    )
    readonly_fields = fields

    @admin.display(description="content")
    def short_content(self, obj: TeamMessage) -> str:
        return scrub(obj.content)[:120]

    @admin.display(description="message")
    def message(self, obj: TeamMessage) -> str:
        return scrub(obj.content)

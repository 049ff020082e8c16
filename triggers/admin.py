"""Back office for triggers. Firing state (failure count, overlap count, the task in flight)
belongs to the trigger engine and is read-only here."""

from __future__ import annotations

from django.contrib import admin

from .models import TriggerConfig


@admin.register(TriggerConfig)
class TriggerConfigAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "team",
        "type",
        "state",
        "overlap_policy",
        "consecutive_failures",
        "updated_at",
    )
    list_filter = ("type", "state", "overlap_policy", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team",)
    search_fields = ("name", "task", "team__name")
    raw_id_fields = ("active_task",)
    readonly_fields = (
        "consecutive_failures",
        "overlap_count",
        "active_task",
        "disabled_reason",
        "created_at",
        "updated_at",
    )

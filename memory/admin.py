"""Back office for team memories."""

from __future__ import annotations

from django.contrib import admin

from .models import Memory


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ("key", "team", "type", "active", "updated_by", "updated_at")
    list_filter = ("type", "active", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team",)
    search_fields = ("key", "content")
    raw_id_fields = ("superseded_by",)
    readonly_fields = ("created_at", "updated_at")

"""Back office for chat topics, messages and the outbox. Messages and outbox rows are history:
read-only. Topics can be renamed or closed."""

from __future__ import annotations

from django.contrib import admin

from openhive.core.admin import ReadOnlyAdmin, ReadOnlyInline

from .models import Message, OutboxMessage, Topic


class MessageInline(ReadOnlyInline):
    model = Message
    fields = ("role", "sender_id", "content", "created_at")


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    list_display = ("name", "channel_id", "state", "created_at", "last_activity_at")
    list_filter = ("state",)
    search_fields = ("name", "channel_id", "description")
    readonly_fields = ("channel_id", "created_at", "last_activity_at")
    inlines = (MessageInline,)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "topic",
        "role",
        "sender_id",
        "trust_decision",
        "trust_reason",
        "short_content",
    )
    list_filter = ("role", "trust_decision", "sender_asserted")
    list_select_related = ("topic",)
    search_fields = ("content", "sender_id", "channel_id")

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return obj.content[:80]


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "channel_id",
        "kind",
        "team_name",
        "short_content",
        "delivered_at",
    )
    list_filter = ("kind", ("delivered_at", admin.EmptyFieldListFilter))
    search_fields = ("content", "channel_id", "team_name")

    @admin.display(description="content")
    def short_content(self, obj: OutboxMessage) -> str:
        return obj.content[:80]

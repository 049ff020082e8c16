"""Back office for trust: sender grants, the decision log (read-only) and API tokens. A token's
digest is never shown; tokens are created with `manage.py openhive token create <user>` (the
plain token is printed once) and revoked here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from openhive.engine.admin import ReadOnlyAdmin

from .models import ApiToken, SenderTrust, TrustAuditLog
from .services import api_token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("masked_prefix", "name", "user", "created_at", "last_used_at", "revoked")
    list_filter = ("revoked",)
    list_select_related = ("user",)
    search_fields = ("prefix", "name", "user__username")
    fields = ("user", "name", "masked_prefix", "created_at", "last_used_at", "revoked")
    readonly_fields = fields
    actions = ("revoke_tokens",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="token", ordering="prefix")
    def masked_prefix(self, obj: ApiToken) -> str:
        return f"{obj.prefix}…"

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        ids = list(queryset.filter(revoked=False).values_list("id", flat=True))
        for token_id in ids:
            api_token_revoke(token_id=token_id)
        self.message_user(request, f"Revoked {len(ids)} token(s).", messages.SUCCESS)


@admin.register(SenderTrust)
class SenderTrustAdmin(admin.ModelAdmin):
    list_display = (
        "sender_id",
        "channel_type",
        "channel_id",
        "trust_level",
        "granted_by",
        "created_at",
    )
    list_filter = ("channel_type", "trust_level")
    search_fields = ("sender_id", "channel_id", "granted_by")
    readonly_fields = ("created_at",)

    def save_model(self, request: HttpRequest, obj: SenderTrust, form: Any, change: bool) -> None:
        if not obj.granted_by:
            obj.granted_by = request.user.get_username()
        super().save_model(request, obj, form, change)


@admin.register(TrustAuditLog)
class TrustAuditLogAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "channel_type",
        "sender_id",
        "sender_asserted",
        "decision",
        "reason",
    )
    list_filter = ("decision", "channel_type", "reason", "sender_asserted")
    search_fields = ("sender_id", "channel_id")
    date_hierarchy = "created_at"

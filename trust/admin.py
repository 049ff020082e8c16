"""Back office for trust: sender grants (with grant/deny/revoke actions and the loaded policy
shown above the list), the decision log (read-only) and API tokens. A token's digest is never
shown; tokens are created with `manage.py openhive token create <user>` (the plain token is
printed once) and revoked here."""

from __future__ import annotations

from typing import Any

import yaml
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from openhive.core.admin import ReadOnlyAdmin
from openhive.core.errors import DomainError

from .models import ApiToken, SenderTrust, TrustAuditLog
from .policy import describe_policy
from .services import (
    TRUST_LEVELS,
    api_token_revoke,
    sender_trust_revoke,
    sender_trust_set,
    sender_trust_validate,
)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = (
        "masked_prefix",
        "name",
        "user",
        "scope",
        "created_at",
        "last_used_at",
        "revoked",
    )
    list_filter = ("revoked", "scope")
    list_select_related = ("user",)
    search_fields = ("prefix", "name", "user__username")
    fields = ("user", "name", "masked_prefix", "scope", "created_at", "last_used_at", "revoked")
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


class SenderTrustForm(forms.ModelForm):
    """The same checks as the tools and the API: known levels, ids of the right channel type."""

    trust_level = forms.ChoiceField(choices=[(x, x) for x in TRUST_LEVELS])

    class Meta:
        model = SenderTrust
        fields = ("channel_type", "channel_id", "sender_id", "trust_level", "granted_by")

    def clean(self) -> dict:
        data = super().clean()
        try:
            sender_trust_validate(
                channel_type=data.get("channel_type") or "",
                channel_id=data.get("channel_id") or "",
                sender_id=data.get("sender_id") or "",
            )
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from exc
        return data


@admin.register(SenderTrust)
class SenderTrustAdmin(admin.ModelAdmin):
    form = SenderTrustForm
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
    actions = ("grant_trust", "deny_senders", "revoke_trust")
    change_list_template = "admin/trust/sendertrust/change_list.html"

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        policy = describe_policy()
        shown = policy.get("policy")
        extra = {
            "trust_policy": policy,
            "trust_policy_yaml": yaml.safe_dump(shown, sort_keys=False) if shown else "",
        }
        return super().changelist_view(request, {**(extra_context or {}), **extra})

    def _set_level(self, request: HttpRequest, queryset: QuerySet, level: str) -> int:
        rows = list(queryset)
        for row in rows:
            sender_trust_set(
                channel_type=row.channel_type,
                sender_id=row.sender_id,
                channel_id=row.channel_id,
                trust_level=level,
                granted_by=f"admin:{request.user.get_username()}",
            )
        return len(rows)

    @admin.action(description="Trust the selected senders", permissions=["change"])
    def grant_trust(self, request: HttpRequest, queryset: QuerySet[SenderTrust]) -> None:
        count = self._set_level(request, queryset, "trusted")
        self.message_user(request, f"Trusted {count} sender(s).", messages.SUCCESS)

    @admin.action(description="Deny the selected senders (silently)", permissions=["change"])
    def deny_senders(self, request: HttpRequest, queryset: QuerySet[SenderTrust]) -> None:
        count = self._set_level(request, queryset, "denied")
        self.message_user(request, f"Denied {count} sender(s).", messages.SUCCESS)

    @admin.action(description="Revoke (policy decides again)", permissions=["delete"])
    def revoke_trust(self, request: HttpRequest, queryset: QuerySet[SenderTrust]) -> None:
        rows = list(queryset)
        for row in rows:
            sender_trust_revoke(
                channel_type=row.channel_type, sender_id=row.sender_id, channel_id=row.channel_id
            )
        self.message_user(request, f"Revoked {len(rows)} entry(ies).", messages.SUCCESS)

    def save_model(self, request: HttpRequest, obj: SenderTrust, form: Any, change: bool) -> None:
        if not obj.granted_by:
            obj.granted_by = f"admin:{request.user.get_username()}"
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

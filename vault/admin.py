"""Back office for team vaults. A secret's value is write-only: no list, form, error page or
history entry ever shows it (nor its ciphertext). A new value typed into `new_secret_value` is
stored encrypted through `vault_store_secret`; plain (non-secret) entries show their value."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from .models import VaultEntry
from .services import vault_store_secret

MASK = "•••••• (secret, encrypted)"
TIMESTAMPS = ("version", "updated_by", "created_at", "updated_at")


class VaultEntryForm(forms.ModelForm):
    new_secret_value = forms.CharField(
        label="New secret value",
        required=False,
        strip=False,
        # Never rendered back, not even after a validation error.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only; stored encrypted. Leave empty to keep the current value. "
        "Filling it makes the entry a secret.",
    )

    class Meta:
        model = VaultEntry
        fields = ("team", "key", "value")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "value" in self.fields:
            self.fields["value"].required = False
            self.fields["value"].help_text = "Plain value (not secret): visible to the team."

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        secret = data.get("new_secret_value")
        if "value" not in self.fields:  # an existing secret: empty keeps it
            return data
        value = data.get("value")
        if secret and value and "value" in self.changed_data:
            raise forms.ValidationError(
                "Fill either the plain value or a new secret value, not both."
            )
        if not secret and not value:
            raise forms.ValidationError("Enter a plain value or a secret value.")
        return data


@admin.register(VaultEntry)
class VaultEntryAdmin(admin.ModelAdmin):
    form = VaultEntryForm
    list_display = (
        "key",
        "team",
        "is_secret",
        "shown_value",
        "version",
        "updated_by",
        "updated_at",
    )
    list_filter = ("is_secret", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team",)
    # Never `value`: searching would let anyone probe ciphertext or a secret's shape.
    search_fields = ("key", "team__name")

    def get_fields(self, request: HttpRequest, obj: VaultEntry | None = None) -> tuple:
        if obj is None:
            return ("team", "key", "value", "new_secret_value")
        if obj.is_secret:
            return ("team", "key", "is_secret", "new_secret_value", *TIMESTAMPS)
        return ("team", "key", "is_secret", "value", "new_secret_value", *TIMESTAMPS)

    def get_readonly_fields(self, request: HttpRequest, obj: VaultEntry | None = None) -> tuple:
        # Renaming an entry or flipping its kind by hand would expose ciphertext as a value.
        return ("team", "key", "is_secret", *TIMESTAMPS) if obj is not None else ()

    @admin.display(description="value")
    def shown_value(self, obj: VaultEntry) -> str:
        return MASK if obj.is_secret else obj.value[:80]

    def save_model(
        self, request: HttpRequest, obj: VaultEntry, form: VaultEntryForm, change: bool
    ) -> None:
        user = request.user.get_username()
        secret = form.cleaned_data.get("new_secret_value")
        if secret:
            entry = vault_store_secret(team=obj.team, key=obj.key, value=secret, updated_by=user)
            # The admin goes on with `obj` (history entry, redirect): make it the stored row.
            obj.pk = entry.pk
            obj._state.adding = False
            obj.refresh_from_db()
            return
        obj.updated_by = user
        if change and "value" in form.changed_data:
            obj.version += 1
        super().save_model(request, obj, form, change)

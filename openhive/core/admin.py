"""Admin base classes shared by every app's back office."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from openhive.core.errors import DomainError

T = TypeVar("T")


class NoEditAdmin(admin.ModelAdmin):
    """Rows only the system writes (derived data, messages): readable and deletable, never
    added or edited by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(NoEditAdmin):
    """Records the system wrote (audit, history): an operator reads them, nobody edits them."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        # Subclasses list their `fields`; all of them are display-only.
        return tuple(self.fields or ())

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def form_errors(call: Callable[[], T]) -> T:
    """Run a service from an admin form: a refused operation becomes the form's error, with
    the same message the tools and the API give."""
    try:
        return call()
    except DomainError as exc:
        raise forms.ValidationError(exc.message) from exc

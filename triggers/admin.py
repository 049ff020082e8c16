"""Back office for triggers. The form validates through the same checks as the tool and the
API (nothing invalid is stored); state moves only through the enable/disable/test actions,
and the firing state belongs to the engine and is read-only here."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from openhive.core.errors import DomainError

from .gates import readiness_of
from .models import TriggerConfig, TriggerEvent
from .schemas import UPDATABLE
from .selectors import trigger_next_fire, trigger_when
from .services import (
    trigger_create,
    trigger_disable,
    trigger_enable,
    trigger_test,
    trigger_update,
)
from .validation import validate_config, validate_fields, validate_targeting


class TriggerForm(forms.ModelForm):
    class Meta:
        model = TriggerConfig
        fields = ("team", "name", "type", *UPDATABLE)

    def clean(self) -> dict:
        data = super().clean()
        team = data.get("team") or getattr(self.instance, "team", None)
        type_ = data.get("type") or self.instance.type
        if team is None or not type_:
            return data
        try:
            checked = {k: data[k] for k in ("name", "task", "timezone") if k in data}
            data.update(validate_fields(fields=checked))
            data["config"] = validate_config(type_, data.get("config"))
            validate_targeting(
                team_name=team.name,
                subagent=data.get("subagent") or "",
                skill=data.get("skill") or "",
            )
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from exc
        return data


@admin.register(TriggerConfig)
class TriggerConfigAdmin(admin.ModelAdmin):
    form = TriggerForm
    list_display = (
        "name",
        "team",
        "type",
        "state",
        "fires",
        "next_fire",
        "consecutive_failures",
        "overlap_policy",
        "last_alert_at",
    )
    list_filter = ("type", "state", "overlap_policy", ("team", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("team",)
    search_fields = ("name", "task", "team__name")
    raw_id_fields = ("active_task",)
    actions = ("enable_triggers", "disable_triggers", "test_triggers")
    readonly_fields = (
        "state",
        "readiness",
        "fires",
        "next_fire",
        "disabled_reason",
        "consecutive_failures",
        "overlap_count",
        "active_task",
        "last_fired_at",
        "last_alert",
        "last_alert_at",
        "source_channel",
        "owner",
        "owner_topic",
        "created_at",
        "updated_at",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: TriggerConfig | None = None):
        # The type decides what the config means; changing it means a new trigger.
        extra = ("team", "name", "type") if obj is not None else ()
        return (*extra, *self.readonly_fields)

    @admin.display(description="readiness")
    def readiness(self, obj: TriggerConfig) -> str:
        # Gated triggers only (learning and reflection cycles): what a firing now would do.
        verdict = readiness_of(obj) if obj.pk else None
        if verdict is None:
            return "-"
        return "ready" if verdict == "" else f"not ready: {verdict}"

    @admin.display(description="fires")
    def fires(self, obj: TriggerConfig) -> str:
        return trigger_when(obj)

    @admin.display(description="next fire")
    def next_fire(self, obj: TriggerConfig) -> str:
        return trigger_next_fire(obj)

    def save_model(self, request: HttpRequest, obj: TriggerConfig, form, change: bool) -> None:
        data = form.cleaned_data
        if change:
            changes = {k: data[k] for k in form.changed_data if k in UPDATABLE}
            if changes:
                saved = trigger_update(trigger=obj, changes=changes)
                obj.pk, obj.updated_at = saved.pk, saved.updated_at
            return
        saved = trigger_create(
            team=data["team"],
            name=data["name"],
            type=data["type"],
            config=data["config"],
            task=data["task"],
            subagent=data.get("subagent") or "",
            skill=data.get("skill") or "",
            max_turns=data.get("max_turns"),
            failure_threshold=data.get("failure_threshold"),
            overlap_policy=data.get("overlap_policy"),
            timezone=data.get("timezone") or "",
            misfire_policy=data.get("misfire_policy"),
        )
        obj.pk = saved.pk

    def _each(self, request: HttpRequest, queryset: QuerySet, verb: str, func) -> None:
        done = 0
        for trigger in queryset.select_related("team"):
            try:
                func(trigger)
                done += 1
            except DomainError as exc:
                self.message_user(request, f"{trigger.name}: {exc.message}", messages.ERROR)
        if done:
            self.message_user(request, f"{verb} {done} trigger(s).", messages.SUCCESS)

    @admin.action(description="Enable selected triggers")
    def enable_triggers(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._each(request, queryset, "Enabled", lambda t: trigger_enable(trigger=t))

    @admin.action(description="Disable selected triggers")
    def disable_triggers(self, request: HttpRequest, queryset: QuerySet) -> None:
        user = request.user.get_username()
        self._each(
            request,
            queryset,
            "Disabled",
            lambda t: trigger_disable(trigger=t, reason=f"disabled in the admin by {user}"),
        )

    @admin.action(description="Test selected triggers (fire once now)")
    def test_triggers(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._each(request, queryset, "Tested", lambda t: trigger_test(trigger=t))


@admin.register(TriggerEvent)
class TriggerEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "trigger", "key", "outcome", "task")
    list_filter = ("outcome",)
    list_select_related = ("trigger", "trigger__team")
    raw_id_fields = ("trigger", "task")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

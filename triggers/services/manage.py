"""Managing triggers: create, update, enable, disable, and the alerts the engine raises. Every
write validates first, so an invalid trigger is refused with nothing stored."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone as django_tz

from openhive.chat.services import outbox_put
from openhive.core.errors import Conflict
from openhive.core.scrubbing import scrub
from tasks.models import Task
from tasks.services import task_enqueue

from ..models import TriggerConfig
from ..schemas import UPDATABLE
from ..validation import InvalidTrigger, validate_config, validate_fields, validate_targeting

logger = logging.getLogger(__name__)

ALERT_LIMIT = 2000


def _clean(*, team, type: str, fields: dict) -> dict:
    fields = validate_fields(fields=fields)
    fields["config"] = validate_config(type, fields.get("config", {}))
    validate_targeting(
        team_name=team.name, subagent=fields.get("subagent", ""), skill=fields.get("skill", "")
    )
    return fields


@transaction.atomic
def trigger_create(
    *,
    team,
    name: str,
    type: str,
    config: dict,
    task: str,
    subagent: str = "",
    skill: str = "",
    max_turns: int | None = None,
    failure_threshold: int | None = None,
    overlap_policy: str | None = None,
    timezone: str = "",
    misfire_policy: str | None = None,
    source_channel: str = "",
    owner: str = "",
    owner_topic_id: int | None = None,
) -> TriggerConfig:
    """A new trigger starts pending: nothing fires until someone enables it."""
    fields = _clean(
        team=team,
        type=type,
        fields={
            "name": name,
            "config": config,
            "task": task,
            "subagent": subagent or "",
            "skill": skill or "",
            "max_turns": max_turns,
            "failure_threshold": failure_threshold,
            "overlap_policy": overlap_policy,
            "timezone": timezone or "",
            "misfire_policy": misfire_policy,
        },
    )
    if TriggerConfig.objects.filter(team=team, name=name).exists():
        raise Conflict(f'trigger "{name}" already exists for team "{team.name}"', code="exists")
    if fields["overlap_policy"] is None:
        # A watch ticks often; piling ticks up or cutting one off mid-scan is rarely wanted.
        fields["overlap_policy"] = "always-skip" if type == "window" else "skip-then-replace"
    try:
        with transaction.atomic():
            return TriggerConfig.objects.create(
                team=team,
                name=name,
                type=type,
                config=fields["config"],
                task=task.strip(),
                subagent=fields["subagent"],
                skill=fields["skill"],
                max_turns=max_turns,
                failure_threshold=failure_threshold or 3,
                overlap_policy=fields["overlap_policy"],
                timezone=fields["timezone"],
                misfire_policy=fields["misfire_policy"] or "skip",
                source_channel=source_channel,
                owner=owner[:200],
                owner_topic_id=owner_topic_id,
            )
    except IntegrityError:
        raise Conflict(
            f'trigger "{name}" already exists for team "{team.name}"', code="exists"
        ) from None


def _rearm(trigger: TriggerConfig) -> None:
    """Forget the clock state: the clock arms the trigger afresh from the next slot."""
    trigger.next_fire_at = None
    trigger.window_opened_at = None
    trigger.window_seen_at = None
    trigger.window_ticks = 0


@transaction.atomic
def trigger_update(*, trigger: TriggerConfig, changes: dict) -> TriggerConfig:
    changes = {k: v for k, v in changes.items() if v is not None}
    unknown = sorted(set(changes) - set(UPDATABLE))
    if unknown:
        raise Conflict(f"cannot update {', '.join(unknown)}", code="not_updatable")
    if not changes:
        raise InvalidTrigger("at least one updatable field must be provided")
    trigger = TriggerConfig.objects.select_for_update().select_related("team").get(pk=trigger.pk)
    merged = {field: getattr(trigger, field) for field in UPDATABLE}
    merged.update(changes)
    fields = _clean(team=trigger.team, type=trigger.type, fields=merged)
    for field in UPDATABLE:
        setattr(trigger, field, fields[field])
    trigger.task = trigger.task.strip()
    if trigger.state == TriggerConfig.State.ACTIVE:
        _rearm(trigger)
    trigger.save()
    return trigger


@transaction.atomic
def trigger_enable(*, trigger: TriggerConfig) -> TriggerConfig:
    """Active again with a clean slate: failures and overlap state reset. A row that became
    invalid (edited in the database) is refused rather than armed."""
    trigger = TriggerConfig.objects.select_for_update().select_related("team").get(pk=trigger.pk)
    _clean(
        team=trigger.team,
        type=trigger.type,
        fields={"config": trigger.config, "timezone": trigger.timezone},
    )
    trigger.state = TriggerConfig.State.ACTIVE
    trigger.consecutive_failures = 0
    trigger.overlap_count = 0
    trigger.disabled_reason = ""
    _rearm(trigger)
    trigger.save()
    return trigger


@transaction.atomic
def trigger_disable(*, trigger: TriggerConfig, reason: str = "disabled by user") -> TriggerConfig:
    """Stops future firings. A run in progress finishes normally; its reference is kept so
    the overlap check still sees it if the trigger is enabled again meanwhile."""
    trigger = TriggerConfig.objects.select_for_update().get(pk=trigger.pk)
    trigger.state = TriggerConfig.State.DISABLED
    trigger.disabled_reason = reason[:200]
    trigger.overlap_count = 0
    _rearm(trigger)
    trigger.save()
    return trigger


def trigger_alert(
    *,
    trigger: TriggerConfig,
    message: str,
    now: datetime | None = None,
    tell_channel: bool = False,
    tell_parent: bool = False,
) -> None:
    """Record an alert on the trigger (admin, list_triggers and `status` show it) and log it
    for the operator; optionally tell the chat that created the trigger and the team's
    parent (an escalation task). Runs inside the caller's transaction."""
    now = now or django_tz.now()
    text = scrub(f"trigger {trigger.team.name}/{trigger.name}: {message}")[:ALERT_LIMIT]
    logger.warning("%s", text)
    TriggerConfig.objects.filter(pk=trigger.pk).update(last_alert=text, last_alert_at=now)
    if tell_channel and trigger.source_channel:
        outbox_put(
            channel_id=trigger.source_channel,
            topic_id=trigger.owner_topic_id,
            team_name=trigger.team.name,
            content=text,
        )
    parent = trigger.team.parent
    if tell_parent and parent is not None:
        task_enqueue(
            team=parent,
            text=f"[alert from the trigger engine] {text}. Decide whether to fix and re-enable "
            f"it (update_trigger, enable_trigger) or leave it disabled.",
            type=Task.Type.ESCALATION,
            priority=Task.Priority.HIGH,
            created_by="trigger-engine",
        )

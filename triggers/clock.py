"""The trigger clock: each pass reads the active schedule and window triggers, asks the pure
decisions what is due, claims the slot or tick with a conditional update and fires it. A bad
trigger row is disabled with an alert; it never stops the loop."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q

from openhive.engine.selectors import session_tokens

from .decisions import WindowState, schedule_decision, window_decision, zone
from .models import TriggerConfig
from .services import (
    trigger_alert,
    trigger_claim_slot,
    trigger_claim_window,
    trigger_disable_invalid,
    trigger_fire,
)
from .validation import InvalidTrigger, validate_config, validate_timezone

logger = logging.getLogger(__name__)

CONFIG_ERRORS = (InvalidTrigger, ValueError, KeyError, TypeError)


def trigger_zone(trigger: TriggerConfig):
    """The trigger's own timezone, else the deployment's TZ, else UTC."""
    name = trigger.timezone or settings.OPENHIVE["TZ"] or "UTC"
    try:
        return zone(validate_timezone(name))
    except InvalidTrigger:
        if trigger.timezone:
            raise
        logger.warning("TZ=%r is not a known timezone; triggers use UTC", name)
        return zone("UTC")


def next_due_within(now: datetime, horizon: timedelta) -> datetime | None:
    return (
        TriggerConfig.objects.filter(
            state=TriggerConfig.State.ACTIVE,
            type__in=[TriggerConfig.Type.SCHEDULE, TriggerConfig.Type.WINDOW],
            next_fire_at__gt=now,
            next_fire_at__lte=now + horizon,
        )
        .order_by("next_fire_at")
        .values_list("next_fire_at", flat=True)
        .first()
    )


def clock_pass(now: datetime) -> dict:
    fired = 0
    rows = (
        TriggerConfig.objects.filter(
            state=TriggerConfig.State.ACTIVE,
            type__in=[TriggerConfig.Type.SCHEDULE, TriggerConfig.Type.WINDOW],
        )
        .filter(
            Q(type=TriggerConfig.Type.WINDOW)
            | Q(next_fire_at__isnull=True)
            | Q(next_fire_at__lte=now)
        )
        .select_related("team")
    )
    for trigger in rows:
        try:
            config = validate_config(trigger.type, trigger.config)
            tz = trigger_zone(trigger)
        except CONFIG_ERRORS as exc:
            trigger_disable_invalid(trigger=trigger, error=exc, now=now)
            continue
        try:
            if trigger.type == TriggerConfig.Type.SCHEDULE:
                fired += _schedule_step(trigger, config, tz, now)
            else:
                fired += _window_step(trigger, config, tz, now)
        except DatabaseError:  # a database blip: the next pass tries again
            logger.exception("trigger %s/%s: clock step failed", trigger.team.name, trigger.name)
        except Exception as exc:  # not the database: this row would fail on every pass
            logger.exception("trigger %s/%s: cannot be evaluated", trigger.team.name, trigger.name)
            trigger_disable_invalid(trigger=trigger, error=exc, now=now, evaluating=True)
    return {"trigger_fired": fired}


@transaction.atomic(durable=True)
def _schedule_step(trigger: TriggerConfig, config: dict, tz, now: datetime) -> int:
    decision = schedule_decision(
        cron=config["cron"],
        tz=tz,
        next_fire_at=trigger.next_fire_at,
        now=now,
        misfire_policy=trigger.misfire_policy,
    )
    if decision is None:
        return 0
    # Claim the slot first: only the loop whose conditional update moves next_fire_at fires,
    # and it commits together with the task, so a crash leaves either both or neither.
    if not trigger_claim_slot(trigger=trigger, next_slot=decision.next_slot):
        return 0
    if decision.missed:
        what = "ran the latest one once" if decision.fire_slot else "skipped them"
        trigger_alert(
            trigger=trigger,
            now=now,
            message=f"missed {decision.missed + (1 if decision.fire_slot else 0)} slot(s) "
            f"since {trigger.next_fire_at:%Y-%m-%d %H:%M} UTC while the engine was down; "
            f"{what} (misfire_policy {trigger.misfire_policy})",
        )
    if decision.fire_slot is None:
        return 0
    result = trigger_fire(
        trigger_id=trigger.pk, event_key=f"schedule:{decision.fire_slot.isoformat()}", now=now
    )
    return 1 if result.task_id and result.outcome != "skipped" else 0


def window_tokens(trigger: TriggerConfig, since: datetime) -> int:
    """Tokens the sessions of this trigger's tasks used since the window opened."""
    return session_tokens(
        task__correlation_id__startswith=f"trigger:{trigger.pk}:", task__created_at__gte=since
    )


@transaction.atomic(durable=True)
def _window_step(trigger: TriggerConfig, config: dict, tz, now: datetime) -> int:
    state = WindowState(
        opened_at=trigger.window_opened_at,
        seen_at=trigger.window_seen_at,
        ticks=trigger.window_ticks,
        next_tick_at=trigger.next_fire_at,
    )
    due = state.opened_at is not None and state.next_tick_at and state.next_tick_at <= now
    decision = window_decision(
        cron=config["watch_window"],
        tz=tz,
        tick_ms=config["tick_interval_ms"],
        max_ticks=config["max_ticks_per_window"],
        max_tokens=config["max_tokens_per_window"],
        tokens_used=window_tokens(trigger, state.opened_at) if due else 0,
        state=state,
        now=now,
    )
    if decision.state == state:
        return 0
    new = decision.state
    if not trigger_claim_window(trigger=trigger, seen=state, new=new):
        return 0
    if decision.event in ("capped-ticks", "capped-tokens"):
        cap = (
            "max_ticks_per_window" if decision.event == "capped-ticks" else "max_tokens_per_window"
        )
        trigger_alert(
            trigger=trigger, now=now, message=f"reached {cap}; no more ticks until it reopens"
        )
    if not decision.tick:
        return 0
    result = trigger_fire(
        trigger_id=trigger.pk,
        event_key=f"window:{new.opened_at.isoformat()}:{new.ticks}",
        now=now,
        context=f"Window tick {new.ticks} of at most {config['max_ticks_per_window']} "
        f"(window opened {new.opened_at:%Y-%m-%d %H:%M} UTC). If there is nothing to report, "
        'answer exactly {"action": "noop", "reason": "<why>"}.',
    )
    return 1 if result.task_id and result.outcome != "skipped" else 0

"""Where triggers meet the running system: the trigger clock on the leading engine loop, the
chat hook for message/keyword triggers, and the task-end hook for the breaker. A bad trigger
row is disabled with an alert; it never stops the loop or a chat turn."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.dispatch import receiver
from django.utils import timezone

from openhive.chat.signals import message_received
from openhive.clock import clock_job
from openhive.engine.models import Session
from tasks.models import Task
from tasks.signals import task_finished

from .decisions import (
    WindowState,
    breaker_decision,
    message_matches,
    schedule_decision,
    window_decision,
    zone,
)
from .firing import EVENT_TYPES, trigger_fire
from .models import TriggerConfig, TriggerEvent
from .services import trigger_alert
from .validation import InvalidTrigger, validate_config, validate_timezone

logger = logging.getLogger(__name__)

# Fine enough for sub-second window ticks; the job runs at most once per engine tick.
CLOCK_EVERY_SECONDS = 0.1
EVENT_RETENTION = timedelta(days=2)
CONFIG_ERRORS = (InvalidTrigger, ValueError, KeyError, TypeError)


def trigger_zone(trigger: TriggerConfig):
    """The trigger's own timezone, else the deployment's TZ, else UTC."""
    name = trigger.timezone or settings.OPENHIVE.get("TZ") or "UTC"
    try:
        return zone(validate_timezone(name))
    except InvalidTrigger:
        if trigger.timezone:
            raise
        logger.warning("TZ=%r is not a known timezone; triggers use UTC", name)
        return zone("UTC")


def _disable_invalid(trigger: TriggerConfig, error: Exception, now: datetime) -> None:
    message = getattr(error, "message", None) or str(error)
    with transaction.atomic():
        TriggerConfig.objects.filter(pk=trigger.pk).update(
            state=TriggerConfig.State.DISABLED, disabled_reason=f"invalid config: {message}"[:200]
        )
        trigger_alert(
            trigger=trigger,
            now=now,
            message=f"disabled: its configuration is invalid ({message})",
            tell_channel=True,
        )


@clock_job("trigger-clock", every_seconds=CLOCK_EVERY_SECONDS)
def trigger_clock(now: datetime) -> dict:
    stats = _clock_pass(now)
    # The loop sleeps a whole engine tick between passes; a slot or tick due within that
    # sleep is waited for precisely here instead of firing up to a tick late. Only against
    # the real clock: a test's fake `now` never makes the loop sleep.
    due = _next_due_within(now, timedelta(seconds=settings.OPENHIVE["ENGINE_TICK_SECONDS"]))
    real = timezone.now()
    if due is not None and abs((real - now).total_seconds()) < 1:
        time.sleep(max(0.0, (due - real).total_seconds()))
        more = _clock_pass(timezone.now())
        stats["trigger_fired"] = stats.get("trigger_fired", 0) + more.get("trigger_fired", 0)
    return {k: v for k, v in stats.items() if v}


def _next_due_within(now: datetime, horizon: timedelta) -> datetime | None:
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


def _clock_pass(now: datetime) -> dict:
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
            _disable_invalid(trigger, exc, now)
            continue
        try:
            if trigger.type == TriggerConfig.Type.SCHEDULE:
                fired += _schedule_step(trigger, config, tz, now)
            else:
                fired += _window_step(trigger, config, tz, now)
        except Exception:  # one trigger's trouble (a database blip) must not stop the others
            logger.exception("trigger %s/%s: clock step failed", trigger.team.name, trigger.name)
    return {"trigger_fired": fired}


@transaction.atomic
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
    claimed = TriggerConfig.objects.filter(
        pk=trigger.pk, state=TriggerConfig.State.ACTIVE, next_fire_at=trigger.next_fire_at
    ).update(next_fire_at=decision.next_slot)
    if not claimed:
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
    total = Session.objects.filter(
        task__correlation_id__startswith=f"trigger:{trigger.pk}:",
        task__created_at__gte=since,
    ).aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    return (total["p"] or 0) + (total["c"] or 0)


@transaction.atomic
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
    claimed = TriggerConfig.objects.filter(
        pk=trigger.pk,
        state=TriggerConfig.State.ACTIVE,
        window_opened_at=state.opened_at,
        window_ticks=state.ticks,
        next_fire_at=state.next_tick_at,
    ).update(
        window_opened_at=new.opened_at,
        window_seen_at=new.seen_at,
        window_ticks=new.ticks,
        next_fire_at=new.next_tick_at,
    )
    if not claimed:
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


@clock_job("trigger-event-cleanup", every_seconds=300)
def trigger_event_cleanup(now: datetime) -> dict:
    """Dedup rows only matter for a short while (a slot, a tick, a message); keep two days of
    history and no more."""
    deleted, _ = TriggerEvent.objects.filter(created_at__lt=now - EVENT_RETENTION).delete()
    return {"trigger_events_pruned": deleted} if deleted else {}


@receiver(message_received, dispatch_uid="triggers-message-received")
def on_message_received(*, message, topic, channel_id: str, sender_id: str, **kwargs) -> None:
    """Runs in the chat path: it must never raise into it."""
    try:
        rows = list(
            TriggerConfig.objects.filter(state=TriggerConfig.State.ACTIVE, type__in=EVENT_TYPES)
        )
    except Exception:
        logger.exception("message triggers: could not read triggers")
        return
    for trigger in rows:
        try:
            config = validate_config(trigger.type, trigger.config)
        except CONFIG_ERRORS as exc:
            _disable_invalid(trigger, exc, message.created_at)
            continue
        try:
            if not message_matches(
                type=trigger.type,
                config=config,
                channel_id=channel_id,
                topic_id=topic.pk,
                text=message.content,
            ):
                continue
            trigger_fire(
                trigger_id=trigger.pk,
                event_key=f"message:{message.pk}",
                context=f"The chat message that fired this trigger:\n{message.content}",
                source_channel=channel_id,
                topic_id=topic.pk,
            )
        except Exception:
            logger.exception("trigger %s: firing on message %s failed", trigger.pk, message.pk)


@receiver(task_finished, dispatch_uid="triggers-task-finished")
def on_task_finished(*, task: Task, **kwargs) -> None:
    """Breaker and overlap bookkeeping, in the transaction that records the task's end."""
    options = task.options or {}
    if task.type != Task.Type.TRIGGER or not options.get("trigger_id"):
        return
    trigger = (
        TriggerConfig.objects.select_for_update(of=("self",))
        .select_related("team", "team__parent")
        .filter(pk=options["trigger_id"])
        .first()
    )
    if trigger is None:
        return
    changed = []
    if trigger.active_task_id == task.pk:
        trigger.active_task = None
        trigger.overlap_count = 0
        changed += ["active_task", "overlap_count"]
    if not options.get("trigger_test"):
        decision = breaker_decision(
            status=task.status,
            consecutive_failures=trigger.consecutive_failures,
            threshold=trigger.failure_threshold,
        )
        trigger.consecutive_failures = decision.consecutive_failures
        changed.append("consecutive_failures")
        if decision.trip and trigger.state == TriggerConfig.State.ACTIVE:
            trigger.state = TriggerConfig.State.DISABLED
            trigger.disabled_reason = f"{decision.consecutive_failures} consecutive failures"
            changed += ["state", "disabled_reason"]
    if changed:
        trigger.save(update_fields=[*changed, "updated_at"])
    if "state" in changed:
        trigger_alert(
            trigger=trigger,
            message=f"disabled after {trigger.consecutive_failures} consecutive failures; "
            f"last error: {task.result[:300]}",
            tell_channel=True,
            tell_parent=True,
        )

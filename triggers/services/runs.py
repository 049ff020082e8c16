"""Writes of the running triggers: the clock's claims of slots and ticks, disabling a row made
invalid, pruning old events, and a finished run's bookkeeping (breaker, overlap, notify)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from openhive.chat.services import outbox_put
from tasks.models import Task

from ..decisions import WindowState, breaker_decision
from ..models import TriggerConfig, TriggerEvent
from ..notify import trigger_notification
from .manage import trigger_alert


def trigger_disable_invalid(
    *, trigger: TriggerConfig, error: Exception, now: datetime, evaluating: bool = False
) -> None:
    """A row made invalid behind the engine's back (edited in the database), or one the clock
    cannot evaluate: disabled, with an alert to the operator and the chat that created it.
    Only the call that moves it out of `active` alerts, so the alert is sent once."""
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    reason, alert = (
        (f"cannot evaluate: {message}", f"disabled: the clock cannot evaluate it ({message})")
        if evaluating
        else (f"invalid config: {message}", f"disabled: its configuration is invalid ({message})")
    )
    with transaction.atomic():
        moved = (
            TriggerConfig.objects.filter(pk=trigger.pk)
            .exclude(state=TriggerConfig.State.DISABLED)
            .update(state=TriggerConfig.State.DISABLED, disabled_reason=reason[:200])
        )
        if moved:
            trigger_alert(trigger=trigger, now=now, message=alert, tell_channel=True)


def trigger_claim_slot(*, trigger: TriggerConfig, next_slot: datetime | None) -> bool:
    """Move a schedule past its due slot, if no other engine loop did: only the loop whose
    conditional update moves `next_fire_at` fires the slot."""
    claimed = TriggerConfig.objects.filter(
        pk=trigger.pk, state=TriggerConfig.State.ACTIVE, next_fire_at=trigger.next_fire_at
    ).update(next_fire_at=next_slot)
    return claimed == 1


def trigger_claim_window(*, trigger: TriggerConfig, seen: WindowState, new: WindowState) -> bool:
    """Advance a window's state from the one this loop read to the next, if it is unchanged."""
    claimed = TriggerConfig.objects.filter(
        pk=trigger.pk,
        state=TriggerConfig.State.ACTIVE,
        window_opened_at=seen.opened_at,
        window_ticks=seen.ticks,
        next_fire_at=seen.next_tick_at,
    ).update(
        window_opened_at=new.opened_at,
        window_seen_at=new.seen_at,
        window_ticks=new.ticks,
        next_fire_at=new.next_tick_at,
    )
    return claimed == 1


def trigger_events_prune(*, before: datetime) -> int:
    deleted, _ = TriggerEvent.objects.filter(created_at__lt=before).delete()
    return deleted


def trigger_record_outcome(*, task: Task) -> None:
    """Breaker and overlap bookkeeping for a finished run (in the transaction that ends it)."""
    options = task.options or {}
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


def trigger_run_notify(*, task: Task) -> None:
    """A run's result reaches the chat that owns the trigger only when the run asks (or its
    type answers by default): the notify contract of `triggers.notify`."""
    if not task.source_channel or task.status == Task.Status.CANCELLED:
        return
    text = trigger_notification(
        trigger_type=task.options.get("trigger_type", ""), status=task.status, result=task.result
    )
    if text is None:
        return
    outbox_put(
        channel_id=task.source_channel,
        topic_id=task.topic_id,
        team_name=task.team.name,
        content=f"[{task.team.name}] {text}",
        task_id=task.pk,
        task_status=task.status,
    )

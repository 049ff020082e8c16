"""The firing pipeline, in this order: still active → dedup → rate limit → overlap policy →
enqueue a `trigger` task. One transaction with the trigger row locked, so two engine loops (or
a clock tick and a chat message) can never both fire the same event."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from openhive.core.errors import Conflict
from tasks.models import Task
from tasks.services import task_cancel, task_enqueue

from ..decisions import TERMINAL_TASK_STATES, overlap_decision, rate_limit_allows
from ..models import TriggerConfig, TriggerEvent
from ..notify import NOTIFY_INSTRUCTION
from .manage import trigger_alert

logger = logging.getLogger(__name__)

EVENT_TYPES = (TriggerConfig.Type.MESSAGE, TriggerConfig.Type.KEYWORD)
RATE_WINDOW = timedelta(seconds=60)


@dataclass(frozen=True)
class FireResult:
    outcome: str  # fired | replaced | skipped | rate_limited | duplicate | inactive
    task_id: int | None = None
    replaced_task_id: int | None = None


def correlation(trigger: TriggerConfig, event_key: str) -> str:
    return f"trigger:{trigger.pk}:{event_key}"[:200]


def task_text(trigger: TriggerConfig, context: str = "") -> str:
    lines = [f"[trigger {trigger.name} ({trigger.type})]"]
    # A named subagent runs this task itself and a named skill's body is delivered with it
    # (the runner acts on the task's options): the text carries no routing sentence.
    lines.append(trigger.task)
    if context:
        lines.append(context)
    # Every run is told how to reach its owner; without this a schedule's findings stay silent.
    lines.append(NOTIFY_INSTRUCTION)
    return "\n\n".join(lines)


def task_options(trigger: TriggerConfig, *, test: bool = False) -> dict:
    options: dict = {
        "trigger_id": trigger.pk,
        "trigger": trigger.name,
        "trigger_type": trigger.type,
        "trigger_test": test,
    }
    for field in ("max_turns", "subagent", "skill"):
        value = getattr(trigger, field)
        if value:
            options[field] = value
    if trigger.type == TriggerConfig.Type.WINDOW and trigger.window_opened_at and not test:
        # The window this tick belongs to: the team's window budgets count from its opening.
        options["window_opened_at"] = trigger.window_opened_at.isoformat()
    return options


def _record(trigger: TriggerConfig, key: str, outcome: str, now: datetime, task=None) -> bool:
    """Insert the event row; False if this event was already seen (the dedup)."""
    try:
        with transaction.atomic():
            TriggerEvent.objects.create(
                trigger=trigger, key=key[:200], outcome=outcome, task=task, created_at=now
            )
    except IntegrityError:
        return False
    return True


def _active_status(trigger: TriggerConfig) -> str | None:
    if trigger.active_task_id is None:
        return None
    status = Task.objects.filter(pk=trigger.active_task_id).values_list("status", flat=True)
    # A reference to a deleted task is as stale as one to a finished task.
    return next(iter(status), Task.Status.DONE)


@transaction.atomic
def trigger_fire(
    *,
    trigger_id: int,
    event_key: str,
    now: datetime | None = None,
    context: str = "",
    source_channel: str | None = None,
    topic_id: int | None = None,
) -> FireResult:
    now = now or timezone.now()
    trigger = (
        TriggerConfig.objects.select_for_update()
        .select_related("team")
        .filter(pk=trigger_id)
        .first()
    )
    if trigger is None or trigger.state != TriggerConfig.State.ACTIVE:
        return FireResult("inactive")
    if not _record(trigger, event_key, TriggerEvent.Outcome.FIRED, now):
        return FireResult("duplicate")
    event = TriggerEvent.objects.filter(trigger=trigger, key=event_key[:200])

    if trigger.type in EVENT_TYPES:
        recent = TriggerEvent.objects.filter(
            trigger=trigger,
            created_at__gt=now - RATE_WINDOW,
            outcome__in=[TriggerEvent.Outcome.FIRED, TriggerEvent.Outcome.REPLACED],
        ).exclude(key=event_key[:200])
        limit = int(trigger.config.get("rate_per_minute") or 10)
        moments = list(recent.values_list("created_at", flat=True))
        if not rate_limit_allows(recent=moments, now=now, limit=limit, per=RATE_WINDOW):
            event.update(outcome=TriggerEvent.Outcome.RATE_LIMITED)
            logger.warning(
                "trigger %s/%s rate-limited (%d per minute)", trigger.team.name, trigger.name, limit
            )
            return FireResult("rate_limited")

    decision = overlap_decision(
        policy=trigger.overlap_policy,
        active_task_status=_active_status(trigger),
        overlap_count=trigger.overlap_count,
    )
    if decision.action == "skip":
        trigger.overlap_count = decision.overlap_count
        trigger.save(update_fields=["overlap_count", "updated_at"])
        event.update(outcome=TriggerEvent.Outcome.SKIPPED, task_id=trigger.active_task_id)
        message = (
            f"skipped a firing: task #{trigger.active_task_id} from the previous firing is "
            f"still active (overlap policy {trigger.overlap_policy})"
        )
        if trigger.type == TriggerConfig.Type.WINDOW:
            # A tick skipped behind a long one is the normal life of a watch: no alert.
            logger.info("trigger %s/%s %s", trigger.team.name, trigger.name, message)
        else:
            # The owner asked for this schedule: a run it will not get is news to them.
            trigger_alert(trigger=trigger, now=now, message=message, tell_channel=True)
        return FireResult("skipped", task_id=trigger.active_task_id)

    replaced = None
    if decision.action == "replace":
        replaced = trigger.active_task_id
        try:
            # The worker's session polls for this status and stops; a late result from it
            # cannot overwrite `cancelled` (task_finish refuses).
            task_cancel(
                task_id=replaced, reason=f"replaced by a newer firing of trigger {trigger.name}"
            )
        except Conflict:
            replaced = None  # it ended a moment ago: nothing to replace
    task = task_enqueue(
        team=trigger.team,
        text=task_text(trigger, context),
        type=Task.Type.TRIGGER,
        source_channel=trigger.source_channel if source_channel is None else source_channel,
        # A clock firing answers in the owner's topic; a chat message's firing, in its own.
        topic_id=trigger.owner_topic_id if source_channel is None else topic_id,
        correlation_id=correlation(trigger, event_key),
        options=task_options(trigger),
        created_by=f"trigger:{trigger.name}",
    )
    trigger.active_task = task if decision.track else None
    trigger.overlap_count = decision.overlap_count
    trigger.last_fired_at = now
    trigger.save(update_fields=["active_task", "overlap_count", "last_fired_at", "updated_at"])
    outcome = TriggerEvent.Outcome.REPLACED if replaced else TriggerEvent.Outcome.FIRED
    event.update(outcome=outcome, task=task)
    if replaced:
        trigger_alert(
            trigger=trigger,
            now=now,
            message=f"replaced task #{replaced} (still active at the next firing) with #{task.pk}",
            tell_channel=True,
        )
    return FireResult(outcome, task_id=task.pk, replaced_task_id=replaced)


@transaction.atomic
def trigger_test(*, trigger: TriggerConfig, max_turns: int | None = None) -> FireResult:
    """Fire once now, whatever the state, bypassing dedup and the rate limit. The trigger's
    overlap policy still guards a run in progress (skip, or replace under always-replace), but
    a test run is never tracked as the active task and never counts for the breaker."""
    trigger = TriggerConfig.objects.select_for_update().select_related("team").get(pk=trigger.pk)
    status = _active_status(trigger)
    # A run waiting for a person is still this trigger's run in progress.
    in_flight = status is not None and status not in TERMINAL_TASK_STATES
    replaced = None
    if in_flight and trigger.overlap_policy in ("always-skip", "skip-then-replace"):
        return FireResult("skipped", task_id=trigger.active_task_id)
    if in_flight and trigger.overlap_policy == "always-replace":
        replaced = trigger.active_task_id
        try:
            task_cancel(task_id=replaced, reason=f"replaced by a test of trigger {trigger.name}")
        except Conflict:
            replaced = None
    options = task_options(trigger, test=True)
    if max_turns:
        options["max_turns"] = max_turns
    task = task_enqueue(
        team=trigger.team,
        text=task_text(trigger),
        type=Task.Type.TRIGGER,
        source_channel=trigger.source_channel,
        topic_id=trigger.owner_topic_id,
        correlation_id=f"trigger-test:{trigger.pk}:{timezone.now().timestamp():.3f}",
        options=options,
        created_by=f"trigger-test:{trigger.name}",
    )
    if replaced:
        TriggerConfig.objects.filter(pk=trigger.pk).update(active_task=None, overlap_count=0)
    return FireResult("replaced" if replaced else "fired", task.pk, replaced)

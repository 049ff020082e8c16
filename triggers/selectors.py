"""Reads: triggers of a team, one trigger, and how to describe when it fires next."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from openhive.core.compiled import CompiledQuery

from .gates import readiness_of
from .models import TriggerConfig


def trigger_get(*, team, name: str) -> TriggerConfig | None:
    return TriggerConfig.objects.select_related("team").filter(team=team, name=name).first()


# Read as every chat message is filed (`message_received`): compiled once, not per message.
_LISTENING = CompiledQuery(
    lambda: TriggerConfig.objects.filter(
        state=TriggerConfig.State.ACTIVE,
        type__in=[TriggerConfig.Type.MESSAGE, TriggerConfig.Type.KEYWORD],
    )
)


def triggers_listening() -> list[TriggerConfig]:
    """Active message and keyword triggers: the ones an inbound chat message may fire."""
    return _LISTENING.rows(TriggerConfig)


def trigger_list(*, team=None, state: str | None = None) -> QuerySet[TriggerConfig]:
    rows = TriggerConfig.objects.select_related("team", "active_task")
    if team is not None:
        rows = rows.filter(team=team)
    if state:
        rows = rows.filter(state=state)
    return rows.order_by("team__name", "name")


def describe_cron(cron: str) -> str:
    try:
        from cron_descriptor import get_description

        return get_description(cron)
    except Exception:  # a description is a nicety; an odd expression must not break a page
        return cron


def trigger_when(trigger: TriggerConfig) -> str:
    """When it fires, in human words (admin, status, list_triggers)."""
    config = trigger.config if isinstance(trigger.config, dict) else {}
    tz = trigger.timezone or "server TZ"
    if trigger.type == TriggerConfig.Type.SCHEDULE:
        return f"{describe_cron(str(config.get('cron', '?')))} ({tz})"
    if trigger.type == TriggerConfig.Type.WINDOW:
        every = int(config.get("tick_interval_ms") or 30000) / 1000
        return (
            f"every {every:g} s while: {describe_cron(str(config.get('watch_window', '?')))} ({tz})"
        )
    if trigger.type == TriggerConfig.Type.KEYWORD:
        what = ", ".join(config.get("keywords") or []) or f"/{config.get('regex', '')}/"
        return f"on chat messages containing {what}"
    pattern = config.get("pattern")
    return f"on chat messages matching /{pattern}/" if pattern else "on every chat message"


def trigger_next_fire(trigger: TriggerConfig) -> str:
    """The next moment the clock will act, in words; empty for message triggers."""
    if trigger.state != TriggerConfig.State.ACTIVE:
        return f"never ({trigger.state})"
    if trigger.type == TriggerConfig.Type.WINDOW and trigger.window_opened_at is not None:
        if trigger.next_fire_at is None:
            return "window open, caps reached"
        return f"window open, next tick {timezone.localtime(trigger.next_fire_at):%H:%M:%S}"
    if trigger.next_fire_at is None:
        return "" if trigger.type in ("message", "keyword") else "arming"
    delta = trigger.next_fire_at - timezone.now()
    seconds = int(delta.total_seconds())
    if seconds < 0:
        return "due now"
    if seconds < 120:
        return f"in {seconds} s"
    if seconds < 7200:
        return f"in {seconds // 60} min ({trigger.next_fire_at:%Y-%m-%d %H:%M} UTC)"
    return f"in {seconds // 3600} h ({trigger.next_fire_at:%Y-%m-%d %H:%M} UTC)"


def trigger_summary(trigger: TriggerConfig) -> dict:
    return {
        "name": trigger.name,
        "team": trigger.team.name,
        "type": trigger.type,
        "state": trigger.state,
        "config": trigger.config,
        "task": trigger.task,
        "subagent": trigger.subagent or None,
        "skill": trigger.skill or None,
        "max_turns": trigger.max_turns,
        "timezone": trigger.timezone or None,
        "misfire_policy": trigger.misfire_policy,
        "failure_threshold": trigger.failure_threshold,
        "consecutive_failures": trigger.consecutive_failures,
        "disabled_reason": trigger.disabled_reason or None,
        "overlap_policy": trigger.overlap_policy,
        "overlap_count": trigger.overlap_count,
        "active_task_id": trigger.active_task_id,
        "when": trigger_when(trigger),
        "next_fire": trigger_next_fire(trigger),
        "last_fired_at": trigger.last_fired_at.isoformat() if trigger.last_fired_at else None,
        "last_alert": trigger.last_alert or None,
        # Who hears its runs and alerts: the chat user that set it up, or only the operators.
        "owner": trigger.owner or None,
    }


def trigger_status_lines() -> list[str]:
    """One line per trigger for `manage.py openhive status`."""
    lines = []
    for trigger in trigger_list():
        line = f"{trigger.team.name}/{trigger.name} [{trigger.type}, {trigger.state}]"
        line += f" {trigger_when(trigger)}"
        if trigger.state == TriggerConfig.State.ACTIVE:
            line += f"; next: {trigger_next_fire(trigger) or 'on message'}"
        elif trigger.disabled_reason:
            line += f"; {trigger.disabled_reason}"
        if trigger.consecutive_failures:
            line += f"; failures {trigger.consecutive_failures}/{trigger.failure_threshold}"
        if trigger.last_alert:
            line += f"; last alert: {trigger.last_alert[:120]}"
        verdict = readiness_of(trigger)  # gated triggers only (learning, reflection cycles)
        if verdict is not None:
            line += "; ready" if verdict == "" else f"; not ready: {verdict}"
        lines.append(line)
    return lines or ["none"]

"""Services behind the org tools that move work between teams: delegate with an overlap policy,
and the child → parent work handoff with a durable rate cap and correlation-id dedup."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from openhive.core.errors import Conflict, DomainError, NotFound
from teams.models import Team

from .models import Task
from .selectors import in_flight_tasks
from .services import task_cancel, task_enqueue, team_critical_section

OVERLAP_POLICIES = ("allow", "skip", "replace", "confirm")


@dataclass
class Delegation:
    status: str  # queued | skipped | in_flight
    task: Task | None = None
    in_flight: list[dict] = field(default_factory=list)
    replaced: list[int] = field(default_factory=list)


def task_delegate(
    *,
    team: Team,
    text: str,
    priority: int,
    overlap_policy: str = "allow",
    source_channel: str = "",
    topic_id: int | None = None,
    created_by: str = "",
) -> Delegation:
    """Queue work for `team`, applying the overlap policy when it already has work in flight:
    allow queues behind it, skip drops the new work, confirm asks first (nothing queued),
    replace cancels the in-flight work (stopping a running session) and queues."""
    if overlap_policy not in OVERLAP_POLICIES:
        raise DomainError(
            f"overlap_policy must be one of {', '.join(OVERLAP_POLICIES)}", code="invalid_input"
        )
    # One decision at a time per team, so two replacing delegations cannot both "win".
    with team_critical_section(team.pk, skip_locked=False):
        in_flight = in_flight_tasks(team=team)
        if in_flight and overlap_policy == "skip":
            return Delegation("skipped", in_flight=in_flight)
        if in_flight and overlap_policy == "confirm":
            return Delegation("in_flight", in_flight=in_flight)
        replaced = []
        if in_flight and overlap_policy == "replace":
            for entry in in_flight:
                try:
                    task_cancel(task_id=entry["task_id"], reason="replaced by newer delegated work")
                    replaced.append(entry["task_id"])
                except Conflict:  # finished meanwhile: nothing left to replace
                    pass
        task = task_enqueue(
            team=team,
            text=text,
            type=Task.Type.DELEGATE,
            priority=priority,
            source_channel=source_channel,
            topic_id=topic_id,
            created_by=created_by,
        )
    return Delegation("queued", task=task, in_flight=in_flight, replaced=replaced)


def task_handoff_to_parent(
    *,
    child: Team,
    text: str,
    priority: int,
    correlation_id: str = "",
    context: str = "",
    source_channel: str = "",
    topic_id: int | None = None,
    created_by: str = "",
) -> Task:
    """Work handed from `child` to its parent's queue. Both guards read the task table itself,
    so they hold across processes and restarts: at most HANDOFF_RATE_PER_MINUTE handoffs per
    child per minute, and one task per correlation id within HANDOFF_DEDUP_SECONDS."""
    parent = child.parent
    if parent is None:
        raise DomainError(
            f'team "{child.name}" has no parent to hand work to; delegate it or do it yourself',
            code="no_parent",
        )
    conf = settings.OPENHIVE
    correlation_id = correlation_id.strip() or f"handoff:{child.name}:{uuid.uuid4().hex[:12]}"
    with team_critical_section(child.pk, skip_locked=False):
        now = timezone.now()
        mine = Task.objects.filter(team=parent, options__handoff_from=child.name)
        dedup_since = now - timedelta(seconds=conf["HANDOFF_DEDUP_SECONDS"])
        duplicate = mine.filter(correlation_id=correlation_id, created_at__gte=dedup_since).first()
        if duplicate is not None:
            raise Conflict(
                f'correlation_id "{correlation_id}" was already handed off as task '
                f"{duplicate.pk} within the last {conf['HANDOFF_DEDUP_SECONDS']:.0f} s; "
                "not queued again",
                code="duplicate_correlation_id",
            )
        recent = list(
            mine.filter(created_at__gte=now - timedelta(seconds=60))
            .order_by("created_at")
            .values_list("created_at", flat=True)
        )
        cap = conf["HANDOFF_RATE_PER_MINUTE"]
        if len(recent) >= cap:
            retry_after = int((recent[0] + timedelta(seconds=60) - now).total_seconds() * 1000)
            raise Conflict(
                f"rate cap reached: at most {cap} handoffs per minute from "
                f'"{child.name}"; retry after {max(retry_after, 0)} ms',
                code="rate_limit_exceeded",
            )
        body = f"[Work handoff from {child.name}] {text.strip()}"
        if context.strip():
            body += f"\n\nContext from {child.name}:\n{context.strip()}"
        return task_enqueue(
            team=parent,
            text=body,
            type=Task.Type.DELEGATE,
            priority=priority,
            source_channel=source_channel,
            topic_id=topic_id,
            correlation_id=correlation_id,
            options={"handoff_from": child.name},
            created_by=created_by or child.name,
        )


def task_requeue(*, task_id: int, requested_by: str = "") -> Task:
    """Queue a failed or cancelled task again as a new pending task (the old row keeps its
    history): same team, text, type, priority, channel and options."""
    old = Task.objects.select_related("team").filter(pk=task_id).first()
    if old is None:
        raise NotFound(f"task {task_id} not found")
    if old.status not in (Task.Status.FAILED, Task.Status.CANCELLED):
        raise Conflict(
            f"task {task_id} is {old.status}; only failed or cancelled tasks can be requeued",
            code="not_requeueable",
        )
    if old.type == Task.Type.QUERY:
        raise Conflict("a synchronous query cannot be requeued", code="not_requeueable")
    options = {k: v for k, v in old.options.items() if k != "stall_escalated"}
    return task_enqueue(
        team=old.team,
        text=old.text,
        type=old.type,
        priority=old.priority,
        source_channel=old.source_channel,
        topic_id=old.topic_id,
        correlation_id=old.correlation_id,
        options={**options, "requeued_from": old.pk},
        created_by=requested_by or f"requeue of #{old.pk}",
    )

"""The admin index's dashboard: what an operator wants to see first. Tasks by state, today's
tokens and cost by team, the engine leader, the workers, provider health and recent failures.
It costs a fixed handful of aggregate queries (about ten), whatever the size of the history.

Workers are seen four ways: the pull workers' heartbeat rows (`engine.WorkerBeat`, renewed
every 2 s by each `openhive worker`, as `serve` runs it), django-q2's cluster heartbeat (each
`qcluster` saves its status, with its worker pids, every second into the shared
`cluster-stats` cache, for 3 s), the task
leases held right now (a worker renews them while it runs a task), and a task handed out to the
workers that nobody claimed for 30 s (the sign that none is taking work)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count
from django.utils import timezone

from openhive.core.errors import ProviderNotConfigured
from openhive.core.scrubbing import scrub
from openhive.engine.budgets import day_start
from openhive.engine.models import LEADER, EngineLease, LlmExchange, Session
from openhive.engine.providers import list_profiles, provider_problems
from openhive.engine.selectors import usage_by_team, workers_alive
from tasks.models import Task
from tasks.selectors import questions_waiting, task_counts_by_status

logger = logging.getLogger(__name__)
# A dispatched task no worker claimed within this long means no worker is taking work.
UNCLAIMED_AFTER = timedelta(seconds=30)
FAILURES_SHOWN = 6
FAILED_STOPS = ("error", "timeout", "budget_exceeded", "worker_died", "max_turns")


def _process(lease_owner: str) -> str:
    """`host:pid:thread[:query]` → `host:pid`: one worker process, whatever thread ran it."""
    return ":".join(lease_owner.split(":")[:2])


def workers(now: datetime) -> dict:
    live = (
        Task.objects.filter(status=Task.Status.RUNNING, lease_expires_at__gt=now)
        .order_by()
        .values_list("lease_owner", flat=True)
    )
    busy: dict[str, int] = {}
    for owner in live:
        busy[_process(owner)] = busy.get(_process(owner), 0) + 1
    waiting = Task.objects.filter(
        status=Task.Status.PENDING, dispatched_at__lt=now - UNCLAIMED_AFTER
    ).count()
    clusters = _pull_workers(now) + _cluster_stats(now)
    return {
        "clusters": clusters,
        "alive": sum(c["workers"] for c in clusters),
        "busy": sorted(busy.items()),
        "unclaimed": waiting,
    }


def _pull_workers(now: datetime) -> list[dict]:
    return [
        {
            "host": beat.name.rsplit(":", 1)[0],
            "pid": beat.name.rsplit(":", 1)[-1],
            "kind": "worker",
            "status": f"{beat.busy} busy" if beat.busy else "idle",
            "workers": beat.threads,
            "up_since": beat.started_at,
        }
        for beat in workers_alive(now)
    ]


def _cluster_stats(now: datetime) -> list[dict]:
    """django-q2's own heartbeat: every cluster that saved its status in the last 3 s."""
    try:
        from django_q.status import Stat

        stats = Stat.get_all()
    except Exception:  # the cache cannot be read (Redis down): say nothing rather than fail
        logger.warning("dashboard: django-q2 cluster stats unreadable", exc_info=True)
        return []
    return sorted(
        (
            {
                "host": s.host,
                "pid": s.pid,
                "kind": "qcluster",
                "status": s.status,
                "workers": len(s.workers or []),
                "up_since": s.tob,
            }
            for s in stats
        ),
        key=lambda c: (c["host"], c["pid"]),
    )


def providers(now: datetime) -> dict:
    error = ""
    try:
        profiles = [p.describe() for p in list_profiles()]
    except ProviderNotConfigured as exc:
        profiles, error = [], scrub(exc.message)
    problems = [error] if error else [scrub(p) for p in provider_problems()]
    since = now - timedelta(hours=24)
    failed_calls = LlmExchange.objects.filter(
        kind=LlmExchange.Kind.FAILED, created_at__gte=since
    ).count()
    waiting = Task.objects.filter(status=Task.Status.PENDING, run_after__gt=now).exclude(
        defer_reason=""
    )
    deferred = waiting.count()
    latest = waiting.order_by("-run_after").values_list("defer_reason", flat=True).first()
    return {
        "profiles": profiles,
        "problems": problems,
        "failed_calls_24h": failed_calls,
        "deferred": deferred,
        "deferred_reason": scrub(latest or ""),
        "healthy": not problems and not deferred and bool(profiles),
    }


def spend_today(now: datetime) -> dict:
    rows = usage_by_team(since=day_start(now), until=now + timedelta(seconds=1))
    return {
        "teams": rows,
        "tokens": sum(r["tokens"] for r in rows),
        "usd": sum((r["usd"] for r in rows), Decimal(0)),
    }


def recent_failures() -> dict:
    tasks = list(
        Task.objects.filter(status=Task.Status.FAILED)
        .select_related("team")
        .order_by("-finished_at", "-id")[:FAILURES_SHOWN]
    )
    for task in tasks:
        task.shown_result = scrub(task.result)
    sessions = list(
        Session.objects.filter(stop_reason__in=FAILED_STOPS)
        .select_related("team")
        .order_by("-started_at", "-id")[:FAILURES_SHOWN]
    )
    for session in sessions:
        session.shown_error = scrub(session.error)
    return {"tasks": tasks, "sessions": sessions}


def dashboard(now: datetime | None = None) -> dict:
    now = now or timezone.now()
    leader = EngineLease.objects.filter(name=LEADER).first()
    by_status = task_counts_by_status()
    last_day = dict(
        Task.objects.filter(finished_at__gte=now - timedelta(hours=24))
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
    )
    return {
        "now": now,
        "tasks": by_status,
        "tasks_total": sum(by_status.values()),
        "finished_24h": last_day,
        "spend": spend_today(now),
        "leader": leader,
        "leader_alive": leader is not None and leader.expires_at >= now,
        "workers": workers(now),
        "providers": providers(now),
        "failures": recent_failures(),
        # Tasks paused until a person answers or an operator approves (answer forms inline).
        "waiting": list(questions_waiting()[:FAILURES_SHOWN]),
    }

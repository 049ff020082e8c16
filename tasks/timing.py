"""The queue's clock arithmetic, in one place: when a lease runs out, and when a task handed to
a worker but never claimed may be handed out again."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q


def lease_until(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.OPENHIVE["LEASE_SECONDS"])


def redispatch_cutoff(now: datetime) -> datetime:
    """A pending task dispatched after this moment is still waiting for its worker."""
    return now - timedelta(seconds=settings.OPENHIVE["REDISPATCH_SECONDS"])


def ready_q(now: datetime) -> Q:
    """Pending work that may run now: not put back to wait for a provider until later."""
    return Q(run_after__isnull=True) | Q(run_after__lte=now)


def defer_delay(defer_count: int, retry_after: float | None) -> float:
    """How long a task whose provider is down waits before its next try: doubling from
    PROVIDER_REQUEUE_SECONDS, at least what the provider asked for, at most the cap."""
    conf = settings.OPENHIVE
    delay = conf["PROVIDER_REQUEUE_SECONDS"] * 2**defer_count
    return min(conf["PROVIDER_REQUEUE_MAX_SECONDS"], max(delay, retry_after or 0.0))

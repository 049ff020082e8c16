from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q

from .models import EngineLease

LEADER = "engine-leader"


def engine_lead(*, holder: str, now: datetime, ttl_seconds: float) -> bool:
    """Take or keep the leadership; True if `holder` leads until now + ttl."""
    expires = now + timedelta(seconds=ttl_seconds)
    kept = (
        EngineLease.objects.filter(name=LEADER)
        .filter(Q(holder=holder) | Q(expires_at__lt=now))
        .update(holder=holder, expires_at=expires)
    )
    if kept:
        return True
    try:
        with transaction.atomic():
            EngineLease.objects.create(
                name=LEADER, holder=holder, expires_at=expires, acquired_at=now
            )
    except IntegrityError:
        return False
    return True


def engine_resign(*, holder: str) -> None:
    EngineLease.objects.filter(name=LEADER, holder=holder).delete()

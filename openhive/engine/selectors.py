from __future__ import annotations

from django.utils import timezone

from .models import EngineLease
from .services import LEADER


def engine_leader() -> EngineLease | None:
    """The current leader, if its lease is still valid."""
    return EngineLease.objects.filter(name=LEADER, expires_at__gte=timezone.now()).first()

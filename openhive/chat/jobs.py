"""Leader-side chat upkeep: idle out quiet topics and tell their sockets."""

from __future__ import annotations

from datetime import datetime

from openhive.core.jobs import clock_job

from .services import topics_changed_notify, topics_idle_stale


@clock_job("idle-quiet-topics", every_seconds=30, order=40)
def idle_quiet_topics(now: datetime) -> dict:
    channels = topics_idle_stale(now=now)
    for channel_id in channels:
        topics_changed_notify(channel_id=channel_id)
    return {"topics_idled_channels": len(channels)}

"""Reads of a team's plugins."""

from __future__ import annotations

from django.db.models import QuerySet

from ..models import Plugin


def plugins_active(*, team_id: int) -> QuerySet[Plugin]:
    return Plugin.objects.filter(team_id=team_id, status=Plugin.Status.ACTIVE).order_by("tool_name")


def plugin_live(*, team_id: int, tool_name: str) -> Plugin | None:
    """The team's plugin of that name that is not removed (active, deprecated or failed)."""
    return (
        Plugin.objects.filter(team_id=team_id, tool_name=tool_name)
        .exclude(status=Plugin.Status.REMOVED)
        .select_related("team")
        .first()
    )

"""Reads of a team's plugins."""

from __future__ import annotations

import os

from django.db.models import QuerySet

from openhive.core.errors import DomainError
from openhive.core.guards.workspace import Workspace

from ..models import Plugin

MAX_SOURCE_BYTES = 400_001


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


def plugin_file(plugin: Plugin) -> bytes | None:
    """The bytes of the plugin's file as it is now, read through the workspace guard (a
    symlink planted in `plugins/` is not followed), or None when there is none."""
    workspace = Workspace.for_team(plugin.team.name)
    try:
        fd = workspace.open_read(workspace.resolve(plugin.source_path))
    except (OSError, DomainError):
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_SOURCE_BYTES)

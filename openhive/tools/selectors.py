"""Reads for the reach tools' back office: recent file writes, fetches and browser actions, per
team."""

from __future__ import annotations

import base64
from datetime import datetime

from django.db.models import Count, Q, QuerySet

from openhive.core import paths

from .models import McpServerStatus, ReachCall

WRITE_TOOLS = ("write_file", "edit_file")
FETCH_TOOLS = ("web_fetch",)
# The browser's actions that touch a page (browser_snapshot only reads, browser_close only ends).
BROWSER_TOOLS = (
    "browser_navigate",
    "browser_click",
    "browser_type",
    "browser_go_back",
    "browser_go_forward",
    "browser_screenshot",
)
REACH_TOOLS = (*WRITE_TOOLS, *FETCH_TOOLS, *BROWSER_TOOLS)


def reach_calls() -> QuerySet[ReachCall]:
    return ReachCall.objects.filter(tool__in=REACH_TOOLS)


def reach_summary(*, since: datetime) -> list[dict]:
    """Per team since `since`: file writes, fetches, browser actions, and how many of them were
    refused."""
    rows = (
        reach_calls()
        .filter(created_at__gte=since)
        .values("team_name")
        .annotate(
            writes=Count("id", filter=Q(tool__in=WRITE_TOOLS)),
            fetches=Count("id", filter=Q(tool__in=FETCH_TOOLS)),
            browser=Count("id", filter=Q(tool__in=BROWSER_TOOLS)),
            refused=Count("id", filter=Q(success=False)),
        )
        .order_by("team_name")
    )
    return list(rows)


def mcp_status(*, team_id: int, server: str) -> McpServerStatus | None:
    return McpServerStatus.objects.filter(team_id=team_id, server=server).first()


def team_mcp_servers(*, team_id: int, configured: list[str]) -> list[dict]:
    """Each MCP server a team's config names, with what the workers last reported of it (a
    server no session has used yet has no report), then any reported one no longer named."""
    rows = {row.server: row for row in McpServerStatus.objects.filter(team_id=team_id)}
    found = []
    for name in [*configured, *sorted(set(rows) - set(configured))]:
        row = rows.get(name)
        found.append(
            {
                "name": name,
                "configured": name in configured,
                "state": row.state if row else "not started yet",
                "tools": [f"mcp__{name}__{t.get('name')}" for t in (row.tools if row else [])],
                "last_error": row.last_error if row else "",
                "updated_at": row.updated_at if row else None,
            }
        )
    return found


def mcp_statuses() -> QuerySet[McpServerStatus]:
    return McpServerStatus.objects.select_related("team").order_by("team__name", "server")


MAX_SHOWN_SCREENSHOT_BYTES = 8 * 1024 * 1024


def screenshot_data(call: ReachCall) -> str | None:
    """The PNG a browser_screenshot call saved, base64-encoded for the admin page; None when
    the call saved none or the file is gone (workspaces are the teams' own to tidy)."""
    result = call.result or {}
    relative = result.get("path")
    if call.tool != "browser_screenshot" or not call.success or not isinstance(relative, str):
        return None
    root = paths.team_dir(call.team_name).resolve()
    path = (root / relative).resolve()
    # The row is scrubbed audit data, not a trusted path: stay inside that team's workspace.
    if not path.is_relative_to(root) or path.suffix != ".png" or not path.is_file():
        return None
    if path.stat().st_size > MAX_SHOWN_SCREENSHOT_BYTES:
        return None
    return base64.b64encode(path.read_bytes()).decode("ascii")

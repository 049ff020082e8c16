"""Reads for the reach tools' back office: recent file writes and fetches, per team."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Q, QuerySet

from .models import McpServerStatus, ReachCall

WRITE_TOOLS = ("write_file", "edit_file")
FETCH_TOOLS = ("web_fetch",)
REACH_TOOLS = (*WRITE_TOOLS, *FETCH_TOOLS)


def reach_calls() -> QuerySet[ReachCall]:
    return ReachCall.objects.filter(tool__in=REACH_TOOLS)


def reach_summary(*, since: datetime) -> list[dict]:
    """Per team since `since`: file writes, fetches, and how many of them were refused."""
    rows = (
        reach_calls()
        .filter(created_at__gte=since)
        .values("team_name")
        .annotate(
            writes=Count("id", filter=Q(tool__in=WRITE_TOOLS)),
            fetches=Count("id", filter=Q(tool__in=FETCH_TOOLS)),
            refused=Count("id", filter=Q(success=False)),
        )
        .order_by("team_name")
    )
    return list(rows)


def mcp_status(*, team_id: int, server: str) -> McpServerStatus | None:
    return McpServerStatus.objects.filter(team_id=team_id, server=server).first()


def mcp_statuses() -> QuerySet[McpServerStatus]:
    return McpServerStatus.objects.select_related("team").order_by("team__name", "server")

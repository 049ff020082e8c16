"""Spend by team, task, trigger and day, each beside the budget that applies to it: one report
for the usage API (/api/v1/usage) and the admin's usage page."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from openhive.engine.budgets import day_start, load_org_budget
from openhive.engine.selectors import (
    spend_totals,
    usage_by_day,
    usage_by_task,
    usage_by_team,
    usage_by_trigger,
)
from teams.selectors import team_budgets


def default_window(now: datetime | None = None) -> tuple[datetime, datetime]:
    """Today (in the deployment's TZ) so far: the period daily budgets count."""
    now = now or timezone.now()
    return day_start(now), now + timedelta(seconds=1)


def usage_report(
    *, since: datetime | None = None, until: datetime | None = None, team: str | None = None
) -> dict:
    start, end = default_window()
    since, until = since or start, until or end
    today = day_start(timezone.now())
    from django.db.models import Q

    org_today = spend_totals({"org": Q(started_at__gte=today)})["org"]
    org = load_org_budget()
    teams = usage_by_team(since=since, until=until, team=team)
    budgets = {row["team"]: team_budgets(name=row["team"]) for row in teams}
    tasks = usage_by_task(since=since, until=until, team=team)
    for row in tasks:
        budgets.setdefault(row["team"], team_budgets(name=row["team"]))
    triggers = usage_by_trigger(since=since, until=until, team=team)
    for row in triggers:
        budgets.setdefault(row["team"], team_budgets(name=row["team"]))

    def pick(name: str, scope: str) -> dict:
        found = budgets.get(name) or {}
        return {k: v for k, v in found.items() if k.startswith(f"{scope}_")}

    return {
        "since": since,
        "until": until,
        "org": {
            "today": {"tokens": org_today[0], "usd": float(org_today[1])},
            "daily_cap": org.model_dump(exclude_none=True),
        },
        "teams": [{**_money(row), "budgets": pick(row["team"], "daily")} for row in teams],
        "tasks": [{**_money(row), "budgets": pick(row["team"], "task")} for row in tasks],
        "triggers": [{**_money(row), "budgets": pick(row["team"], "window")} for row in triggers],
        "days": [_money(row) for row in usage_by_day(since=since, until=until, team=team)],
    }


def _money(row: dict) -> dict:
    return {**row, "usd": float(row["usd"])}

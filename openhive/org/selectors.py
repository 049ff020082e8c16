"""Reads over one team for the admin's team page: its config.yaml as written, the provider
profile it uses (and whether that profile can be used), its scope, the tools its allowlist
admits, its recent tasks and sessions, and its spend."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import F, Q, Sum
from django.utils import timezone

from openhive.core.errors import DomainError
from openhive.core.registry import team_tools
from openhive.core.scrubbing import scrub
from openhive.engine.budgets import day_start
from openhive.engine.models import Session
from openhive.engine.providers import provider_problems, resolve_profile
from tasks.models import Task
from teams.config import config_path, load_team_config, team_config_problem
from teams.models import Team

RECENT = 10
# config.yaml is shown whole unless it is unreasonably long.
CONFIG_CHARS = 20_000


def _config_text(team: Team) -> str:
    try:
        text = config_path(team.name).read_text(errors="replace")
    except OSError:
        return ""
    if len(text) > CONFIG_CHARS:
        text = text[:CONFIG_CHARS] + "\n# … (cut)"
    return scrub(text)


def _spend(team: Team) -> dict:
    """Today, the last 7 days and all time, in one query."""
    now = timezone.now()
    tokens = F("prompt_tokens") + F("completion_tokens")
    scopes = {
        "today": Q(started_at__gte=day_start(now)),
        "week": Q(started_at__gte=now - timedelta(days=7)),
        "all": Q(),
    }
    aggregates = {}
    for name, scope in scopes.items():
        aggregates[f"{name}_tokens"] = Sum(tokens, filter=scope)
        aggregates[f"{name}_usd"] = Sum("cost_usd", filter=scope)
    row = Session.objects.filter(team=team).aggregate(**aggregates)
    return {
        name: {"tokens": int(row[f"{name}_tokens"] or 0), "usd": row[f"{name}_usd"] or 0}
        for name in scopes
    }


def _profile(name: str) -> dict:
    """The profile the team uses, as an operator may see it, and why it cannot be used."""
    try:
        profile = resolve_profile(name)
    except DomainError as exc:
        return {"name": name, "problem": scrub(exc.message)}
    # Problems of this profile that do not stop it resolving (a fallback that is broken, ...).
    problems = [scrub(p) for p in provider_problems() if f'profile "{name}"' in p]
    return {**profile.describe(), "problem": "; ".join(problems)}


def team_page(team: Team) -> dict:
    problem = team_config_problem(team.name)
    config = None if problem else load_team_config(team.name)
    tools: list[str] = []
    if config is not None:
        tools = [spec.name for spec in team_tools(team, config.allowed_tools)]
    tasks = list(Task.objects.filter(team=team).order_by("-created_at", "-id")[:RECENT])
    for task in tasks:
        task.shown_text, task.shown_result = scrub(task.text), scrub(task.result)
    return {
        "config_text": _config_text(team),
        "config_problem": problem,
        "config": config,
        "profile": _profile(config.provider_profile) if config else None,
        "scope": [k.keyword for k in team.scope_keywords.all()],
        "tools": tools,
        "tasks": tasks,
        "sessions": list(Session.objects.filter(team=team).order_by("-started_at", "-id")[:RECENT]),
        "spend": _spend(team),
    }

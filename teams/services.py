"""State changes of the org tree. Parent/child rules are checked here, in code."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from openhive import paths
from openhive.errors import Conflict, DomainError
from tasks.models import Task
from tasks.services import task_enqueue
from vault.scrubbing import Scrubber
from vault.services import vault_store_secret

from .config import default_config, write_team_config
from .models import MAIN_TEAM, TEAM_NAME_PATTERN, ScopeKeyword, Team

WORKSPACE_FOLDERS = ("org-rules", "team-rules", "skills", "subagents", "plugins")
_NAME_RE = re.compile(TEAM_NAME_PATTERN)


def team_ensure_main() -> Team:
    """The root team exists after migrate/init, with a workspace and config."""
    team, _ = Team.objects.get_or_create(
        name=MAIN_TEAM,
        defaults={"description": "Main orchestrator", "bootstrapped": True},
    )
    workspace = paths.team_dir(MAIN_TEAM)
    if not (workspace / "config.yaml").exists():
        _scaffold(workspace)
        write_team_config(default_config(MAIN_TEAM, parent=None, description=team.description))
    return team


@dataclass
class SpawnResult:
    team: Team
    bootstrap_task: Task


# Names that would shadow a fixed route (`/api/v1/teams/tree`) or the root team.
RESERVED_NAMES = frozenset({"tree", MAIN_TEAM})


def validate_team_name(name: str) -> None:
    if name in RESERVED_NAMES:
        raise DomainError(f'"{name}" is a reserved team name; choose another', code="invalid_name")
    if not _NAME_RE.fullmatch(name) or len(name) > 64:
        raise DomainError(
            "team name must be a lowercase slug (a-z, 0-9 and single hyphens), at most 64 "
            f"characters: {name!r}",
            code="invalid_name",
        )


def team_spawn(
    *,
    parent: Team,
    name: str,
    description: str = "",
    scope_accepts: list[str] | None = None,
    init_context: str = "",
    credentials: dict[str, str] | None = None,
    source_channel: str = "",
    topic_id: int | None = None,
    created_by: str = "",
) -> SpawnResult:
    """Create a child team: rows, workspace, secrets and a critical bootstrap task. Any failure
    removes the workspace again (the database rolls back by itself)."""
    validate_team_name(name)
    workspace = paths.team_dir(name)
    if workspace.resolve().parent != paths.teams_dir().resolve():
        raise DomainError("path traversal detected in team name", code="invalid_name")
    if Team.objects.filter(name=name).exists():
        raise Conflict(f'team "{name}" already exists')
    if workspace.exists():
        raise Conflict(
            f'a workspace folder for "{name}" already exists at {workspace}; remove it or '
            "choose another name"
        )
    credentials = credentials or {}
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name, parent=parent, description=description)
            keywords = sorted({k.strip().lower() for k in scope_accepts or [] if k.strip()})
            ScopeKeyword.objects.bulk_create([ScopeKeyword(team=team, keyword=k) for k in keywords])
            for key, value in credentials.items():
                vault_store_secret(team=team, key=key, value=value, updated_by=parent.name)
            _scaffold(workspace)
            write_team_config(default_config(name, parent=parent.name, description=description))
            if init_context:
                # Credentials handed over in the same call never reach a prompt file, however
                # short: here we know for certain that they are secrets.
                safe = Scrubber(credentials.values(), min_length=1).text(init_context)
                (workspace / "team-rules" / "team-context.md").write_text(
                    "# Team context\n\n" + safe.strip() + "\n"
                )
            task = task_enqueue(
                team=team,
                text=bootstrap_text(team),
                type=Task.Type.BOOTSTRAP,
                priority=Task.Priority.CRITICAL,
                source_channel=source_channel,
                topic_id=topic_id,
                created_by=created_by or parent.name,
            )
    except BaseException:
        shutil.rmtree(workspace, ignore_errors=True)
        raise
    return SpawnResult(team=team, bootstrap_task=task)


def _scaffold(workspace: Path) -> None:
    for folder in WORKSPACE_FOLDERS:
        (workspace / folder).mkdir(parents=True, exist_ok=True)


def bootstrap_text(team: Team) -> str:
    return (
        f"Bootstrap this team ({team.name}). "
        + (f"Its purpose: {team.description}. " if team.description else "")
        + "Read your team rules and context, decide how you will work within your scope, and "
        "reply with a short summary of what this team is ready to do."
    )

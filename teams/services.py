"""State changes of the org tree. Parent/child rules are checked here, in code."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.db import transaction
from pydantic import ValidationError

from openhive import paths
from openhive.errors import Conflict, DomainError
from tasks.models import Task
from tasks.services import task_enqueue
from vault.scrubbing import Scrubber
from vault.services import vault_store_secret

from .config import TeamConfig, default_config, write_team_config
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
    config_path: str = "",
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
    config = (
        _config_from_file(config_path, name=name, parent=parent.name, description=description)
        if config_path
        else default_config(name, parent=parent.name, description=description)
    )
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name, parent=parent, description=description)
            keywords = sorted({k.strip().lower() for k in scope_accepts or [] if k.strip()})
            ScopeKeyword.objects.bulk_create([ScopeKeyword(team=team, keyword=k) for k in keywords])
            for key, value in credentials.items():
                vault_store_secret(team=team, key=key, value=value, updated_by=parent.name)
            _scaffold(workspace)
            write_team_config(config)
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


def _config_from_file(path: str, *, name: str, parent: str, description: str) -> TeamConfig:
    """A team config read from a file inside the data or runtime dir; name and parent always
    come from the call, never from the file."""
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = paths.data_dir() / candidate
    resolved = candidate.resolve()
    roots = [paths.data_dir().resolve(), paths.run_dir().resolve()]
    if not any(resolved.is_relative_to(root) for root in roots):
        raise DomainError(
            f"config_path must be inside the data dir or the runtime dir: {path}",
            code="config_error",
        )
    try:
        data = yaml.safe_load(resolved.read_text()) or {}
        if not isinstance(data, dict):
            raise DomainError(f"config error in {path}: expected a mapping", code="config_error")
        merged = {"description": description, **data, "name": name, "parent": parent}
        if description:
            merged["description"] = description
        return TeamConfig.model_validate(merged)
    except OSError as exc:
        raise DomainError(
            f"config error: cannot read {path}: {exc.strerror}", code="config_error"
        ) from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise DomainError(f"config error in {path}: {exc}", code="config_error") from exc


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


def team_shutdown(*, team: Team, cascade: bool = False) -> list[str]:
    """Remove a team and everything scoped to it: its tasks (running sessions are cancelled
    first, so they stop), triggers, memories, vault, sessions, messages and mutex rows (all by
    foreign key), then its workspace folder once the deletion is committed. With `cascade`,
    descendants go first, depth-first; without it, a team with children is refused. Returns
    the removed team names in removal order."""
    if team.name == MAIN_TEAM:
        raise DomainError("the main team cannot be shut down", code="invalid_target")
    children = list(team.children.order_by("name").values_list("name", flat=True))
    if children and not cascade:
        raise Conflict(
            f'team "{team.name}" has {len(children)} active children ({", ".join(children)}): '
            "shut them down first, or pass cascade: true",
            code="has_children",
        )
    removed: list[str] = []
    with transaction.atomic():
        _shutdown_subtree(team, removed, seen=set())
    return removed


def _shutdown_subtree(team: Team, removed: list[str], seen: set[int]) -> None:
    if team.pk in seen:  # a cycle cannot exist through the API, but never loop on one
        return
    seen.add(team.pk)
    for child in team.children.order_by("name"):
        _shutdown_subtree(child, removed, seen)
    from tasks.services import task_cancel

    Team.objects.filter(pk=team.pk).update(status=Team.Status.SHUTTING_DOWN)
    in_flight = team.tasks.filter(status__in=[Task.Status.PENDING, Task.Status.RUNNING])
    for task_id in in_flight.values_list("pk", flat=True):
        task_cancel(task_id=task_id, reason=f"team {team.name} was shut down")
    workspace = paths.team_dir(team.name)
    team.delete()
    removed.append(team.name)
    transaction.on_commit(lambda: shutil.rmtree(workspace, ignore_errors=True))


@transaction.atomic
def team_update_scope(
    *, team: Team, add: list[str] | None = None, remove: list[str] | None = None
) -> list[str]:
    """Apply a keyword delta (lowercased, trimmed); a team never ends with zero keywords.
    Returns the resulting scope, sorted."""
    to_add = {k.strip().lower() for k in add or [] if k.strip()}
    to_remove = {k.strip().lower() for k in remove or [] if k.strip()}
    if not to_add and not to_remove:
        raise DomainError(
            "at least one of scope_add or scope_remove is required", code="invalid_input"
        )
    Team.objects.select_for_update().filter(pk=team.pk).first()
    current = set(team.scope_keywords.values_list("keyword", flat=True))
    result = (current | to_add) - to_remove
    if not result:
        raise DomainError(
            f'update would leave team "{team.name}" with zero scope keywords', code="zero_scope"
        )
    ScopeKeyword.objects.filter(team=team, keyword__in=current - result).delete()
    ScopeKeyword.objects.bulk_create(
        [ScopeKeyword(team=team, keyword=k) for k in sorted(result - current)]
    )
    return sorted(result)

"""Use cases over the org tree that span apps: spawning a team (rows, workspace, vault
secrets, the bootstrap task) and shutting one down (its work cancelled, every row and its
workspace removed). The tools, the REST API, the admin and the CLI all come here."""

from __future__ import annotations

import logging
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.db import transaction
from pydantic import ValidationError

from openhive.core import paths
from openhive.core.errors import Conflict, DomainError
from openhive.core.registry import team_tools
from openhive.core.scrubbing import Scrubber, scrub
from tasks.models import Task
from tasks.services import task_cancel, task_enqueue
from teams.config import TeamConfig, default_config, write_team_config
from teams.models import MAIN_TEAM, ScopeKeyword, Team
from teams.services import team_workspace_scaffold, validate_team_name
from teams.skills import load_skills
from teams.subagents import load_subagents
from triggers.models import TriggerConfig
from triggers.services import trigger_create, trigger_enable
from vault.services import vault_store_secret

logger = logging.getLogger(__name__)


@dataclass
class SpawnResult:
    team: Team
    bootstrap_task: Task


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
        with transaction.atomic(durable=True):
            team = Team.objects.create(name=name, parent=parent, description=description)
            keywords = sorted({k.strip().lower() for k in scope_accepts or [] if k.strip()})
            ScopeKeyword.objects.bulk_create([ScopeKeyword(team=team, keyword=k) for k in keywords])
            for key, value in credentials.items():
                vault_store_secret(team=team, key=key, value=value, updated_by=parent.name)
            team_workspace_scaffold(workspace)
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


# System configuration lives beside team configs but is never one: it holds provider keys.
SYSTEM_CONFIG_FILES = frozenset({"providers.yaml", "channels.yaml"})


def _config_from_file(path: str, *, name: str, parent: str, description: str) -> TeamConfig:
    """A team config read from a YAML file in the data dir's config folder; name and parent
    always come from the call, never from the file. Errors name the problem and where it is,
    never a value from the file (the folder also holds files with provider keys)."""
    folder = paths.config_dir().resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = folder / candidate
    resolved = candidate.resolve()
    shown = scrub(path)[:200]
    if not resolved.is_relative_to(folder) or resolved.suffix not in (".yaml", ".yml"):
        raise DomainError(
            f"config_path must name a .yaml file in the config folder ({folder}): {shown}",
            code="config_error",
        )
    if resolved.name in SYSTEM_CONFIG_FILES and resolved.parent == folder:
        raise DomainError(
            f"config_path {shown} is system configuration, not a team config", code="config_error"
        )
    try:
        data = yaml.safe_load(resolved.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise DomainError(
            f"config error: cannot read {shown}: {exc.strerror}", code="config_error"
        ) from None
    except (UnicodeDecodeError, ValueError):
        raise DomainError(
            f"config error: {shown} is not a UTF-8 text file", code="config_error"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise DomainError(
            f"config error in {shown}{where}: {problem}", code="config_error"
        ) from None
    if not isinstance(data, dict):
        raise DomainError(f"config error in {shown}: expected a mapping", code="config_error")
    merged = {"description": description, **data, "name": name, "parent": parent}
    if description:
        merged["description"] = description
    try:
        return TeamConfig.model_validate(merged)
    except ValidationError as exc:
        # Where and what, without the offending values.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise DomainError(f"config error in {shown}: {problems}", code="config_error") from None


def bootstrap_text(team: Team) -> str:
    """The bootstrap task: the team builds itself from its context. Learning and reflection
    triggers per subagent are seeded by the system once the bootstrap succeeds
    (`team_bootstrap_record`), not left to the model."""
    purpose = f" Its purpose: {team.description}." if team.description else ""
    return f"""Bootstrap this team ({team.name}).{purpose}

Build the team that will do this work, with your tools, in this order:
1. Read your context: your team rules and `team-context.md` are in this prompt; call
   `vault_list` to see which credentials and state keys you have (`vault_get` reads one
   when a step needs it; never copy a secret value into a file, memory or reply).
2. Save who you are: `memory_save` with key `identity`, type `identity`, a few sentences on
   what this team does, for whom, and what it watches.
3. Write your subagents (who does the work), one file each with `write_file`:
   `subagents/<name>.md` (a lowercase slug), starting with a front matter block:
       ---
       description: one line saying what this subagent does
       tools: [read_file, web_fetch]   # optional: only these of your tools
       ---
   then its identity and boundaries in markdown. You will hand every piece of work to one of
   them with `run_subagent`, so cover your whole scope.
4. Write the skills they need (how to do things): `skills/<name>/SKILL.md` with a front matter
   block of `name` and `description`, then the procedure step by step.
5. If a skill needs a tool you do not have, register a plugin with `register_plugin_tool`
   (one Python module with DESCRIPTION, PARAMETERS and run(args)); it is offered as
   `plugin__<name>`.
6. Triggers are not yours to create (your parent manages them): a learning and a reflection
   trigger per subagent are created for you when the bootstrap succeeds.
If files from an earlier attempt exist, read them and fix what is wrong rather than start over.
Finish with a short summary for the person who asked for this team: what it is ready to do."""


# Per-subagent learning and reflection cycles (ADR-35/40): seeded active once the bootstrap
# succeeded; each firing passes the cycle's readiness gates (evolution.services.cycles) before
# any task is created, so an unready team costs a skipped run row, not a model call.
CYCLES = (
    (
        "learning-cycle",
        2,
        100,
        "Run a learning cycle for your work as {subagent}: research this cycle's topics and "
        "record what you learn.",
    ),
    (
        "reflection-cycle",
        3,
        30,
        "Run a reflection cycle for your work as {subagent}: review task outcomes and improve.",
    ),
)


def _cycle_minute(team_name: str, subagent: str) -> int:
    """A stable minute of the hour per team and subagent: a team's subagents do not all wake
    at the same minute (the reference's bug), and a re-seed picks the same one."""
    return zlib.crc32(f"{team_name}/{subagent}".encode()) % 60


@dataclass
class BootstrapRecord:
    subagents: list[str]
    skills: list[str]
    plugins: list[str]
    memories: list[str]
    triggers: list[str]
    seeded: list[str]

    def summary(self) -> str:
        def part(label: str, names: list[str]) -> str:
            return f"{label}: {', '.join(names) if names else 'none'}"

        return "Built: " + "; ".join(
            [
                part("subagents", self.subagents),
                part("skills", self.skills),
                part("plugins", self.plugins),
                part("memories", self.memories),
                part("triggers", self.triggers),
            ]
        )


@transaction.atomic
def team_bootstrap_record(*, team: Team) -> BootstrapRecord:
    """After a successful bootstrap: seed the learning and reflection triggers of every valid
    subagent (active, each gated when it fires; skipped when the name exists already), and say
    what the team was built with. Idempotent."""
    subagents, _problems = load_subagents(team.name)
    seeded: list[str] = []
    existing = set(TriggerConfig.objects.filter(team=team).values_list("name", flat=True))
    # The main agent only routes work: it never gets cycles.
    for subagent in subagents if team.name != MAIN_TEAM else []:
        for prefix, hour, max_turns, text in CYCLES:
            name = f"{prefix}-{subagent.name}"
            if name in existing:
                continue
            minute = _cycle_minute(team.name, subagent.name)
            try:
                trigger = trigger_create(
                    team=team,
                    name=name,
                    type=TriggerConfig.Type.SCHEDULE,
                    config={"cron": f"{minute} {hour} * * *"},
                    task=text.format(subagent=subagent.name),
                    subagent=subagent.name,
                    max_turns=max_turns,
                    overlap_policy=TriggerConfig.OverlapPolicy.ALWAYS_SKIP,
                )
                trigger_enable(trigger=trigger)
            except DomainError as exc:  # one refused trigger must not undo the bootstrap
                logger.warning("team %s: trigger %s not seeded: %s", team.name, name, exc)
                continue
            seeded.append(name)
    record = BootstrapRecord(
        subagents=[s.name for s in subagents],
        skills=sorted(load_skills(team.name).skills),
        plugins=[spec.name for spec in team_tools(team, ["plugin__*"])],
        memories=sorted(team.memories.filter(active=True).values_list("key", flat=True)),
        triggers=sorted(TriggerConfig.objects.filter(team=team).values_list("name", flat=True)),
        seeded=seeded,
    )
    logger.info("team %s bootstrapped. %s", team.name, record.summary())
    return record


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
    with transaction.atomic(durable=True):
        _shutdown_subtree(team, removed, seen=set())
    return removed


def _shutdown_subtree(team: Team, removed: list[str], seen: set[int]) -> None:
    if team.pk in seen:  # a cycle cannot exist through the API, but never loop on one
        return
    seen.add(team.pk)
    for child in team.children.order_by("name"):
        _shutdown_subtree(child, removed, seen)
    Team.objects.filter(pk=team.pk).update(status=Team.Status.SHUTTING_DOWN)
    in_flight = team.tasks.filter(status__in=[Task.Status.PENDING, Task.Status.RUNNING])
    for task_id in in_flight.values_list("pk", flat=True):
        task_cancel(task_id=task_id, reason=f"team {team.name} was shut down")
    workspace = paths.team_dir(team.name)
    team.delete()
    removed.append(team.name)
    transaction.on_commit(lambda: shutil.rmtree(workspace, ignore_errors=True))

"""Starting a cycle: which triggers are cycles, the readiness gates (code, not prose), the topics
code picks for a learning cycle, and the journal each subagent keeps in its team's vault."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path

from openhive.core.errors import DomainError
from openhive.core.registry import team_tools
from teams.config import load_team_config
from teams.models import MAIN_TEAM, Team
from teams.subagents import load_subagent
from triggers.gates import GateResult
from triggers.models import TriggerConfig
from vault.services import vault_read, vault_set

from ..models import CycleKind, CycleRun

logger = logging.getLogger(__name__)

PREFIXES = {"learning-cycle": CycleKind.LEARNING, "reflection-cycle": CycleKind.REFLECTION}
# What each cycle cannot do without (checked against the team's allowlist narrowed by the
# subagent's own `tools`, i.e. what the cycle's session will really be offered).
REQUIRED_TOOLS: dict[str, tuple[str, ...]] = {
    CycleKind.LEARNING: ("web_fetch", "memory_search", "vault_get", "record_learning"),
    CycleKind.REFLECTION: (
        "list_completed_tasks",
        "search_history",
        "read_history_entry",
        "read_file",
        "propose_change",
    ),
}
TOPICS_PER_CYCLE = 3
JOURNAL_ENTRIES = 50
SKILLS_DIR = Path(__file__).resolve().parents[2] / "openhive" / "system_rules" / "skills"


def cycle_kind(trigger: TriggerConfig) -> str | None:
    """A trigger named learning-cycle-* or reflection-cycle-* is a cycle (the names the system
    seeds; a trigger made by hand with such a name is gated the same way)."""
    for prefix, kind in PREFIXES.items():
        if trigger.name == prefix or trigger.name.startswith(prefix + "-"):
            return kind
    return None


def journal_key(kind: str, team: Team, subagent: str) -> str:
    return f"{kind}:{team.name}:{subagent or 'team'}:journal"


def journal_read(kind: str, team: Team, subagent: str) -> dict:
    entry = vault_read(team=team, key=journal_key(kind, team, subagent))
    if entry is None or entry.is_secret:
        return {"next_topic": 0, "entries": []}
    try:
        data = json.loads(entry.value)
    except ValueError:
        return {"next_topic": 0, "entries": []}  # hand-edited into nonsense: start over
    return data if isinstance(data, dict) else {"next_topic": 0, "entries": []}


def journal_write(kind: str, team: Team, subagent: str, data: dict) -> None:
    data["entries"] = list(data.get("entries", []))[-JOURNAL_ENTRIES:]
    vault_set(
        team=team,
        key=journal_key(kind, team, subagent),
        value=json.dumps(data, sort_keys=True),
        updated_by=f"{kind}-cycle",
    )


def journal_note(run: CycleRun, **fields: object) -> None:
    """Update this run's journal entry (added when it started)."""
    data = journal_read(run.kind, run.team, run.subagent)
    for entry in data.get("entries", []):
        if entry.get("run") == run.pk:
            for key, value in fields.items():
                if isinstance(value, list):
                    entry[key] = [*entry.get(key, []), *value]
                else:
                    entry[key] = value
    journal_write(run.kind, run.team, run.subagent, data)


def cycle_readiness(team: Team, kind: str, subagent: str) -> str | None:
    """Why the cycle cannot run now, or None when it is ready."""
    if team.name == MAIN_TEAM:
        return "the main agent routes work; it runs no learning or reflection cycles"
    if not team.bootstrapped:
        return f"team {team.name} is not bootstrapped yet"
    if not team.scope_keywords.exists():
        return f"team {team.name} has no scope keywords (its parent sets them with update_team)"
    needed = REQUIRED_TOOLS[kind]
    config = load_team_config(team.name)
    offered = {spec.name for spec in team_tools(team, config.allowed_tools, only=needed)}
    if subagent:
        try:
            agent = load_subagent(team.name, subagent)
        except DomainError as exc:
            return f"subagent {subagent} cannot be loaded: {exc.message}"
        offered = {name for name in offered if agent.admits(name)}
    missing = [name for name in needed if name not in offered]
    if missing:
        return (
            f"the {kind} cycle needs tools the team's allowlist"
            f"{' (narrowed by the subagent)' if subagent else ''} does not offer: "
            + ", ".join(missing)
        )
    return None


def trigger_readiness(trigger: TriggerConfig) -> str | None:
    """For pages: None when the trigger is no cycle, "" when ready, else the reason."""
    kind = cycle_kind(trigger)
    if kind is None:
        return None
    return cycle_readiness(trigger.team, kind, trigger.subagent) or ""


def pick_topics(team: Team, subagent: str, journal: dict) -> list[str]:
    """Rotate through the scope keywords: each cycle takes the next few after the last one's."""
    keywords = sorted(team.scope_keywords.values_list("keyword", flat=True))
    if not keywords:
        return []
    start = int(journal.get("next_topic") or 0) % len(keywords)
    count = min(TOPICS_PER_CYCLE, len(keywords))
    journal["next_topic"] = (start + count) % len(keywords)
    return [keywords[(start + i) % len(keywords)] for i in range(count)]


def skill_body(kind: str) -> str:
    return (SKILLS_DIR / f"{kind}-cycle.md").read_text().strip()


def cycle_gate(trigger: TriggerConfig, now: datetime, test: bool) -> GateResult | None:
    """The trigger pipeline's gate for cycles: a not-ready cycle is recorded as skipped with
    its reason; a ready one gets its run row, its topics and its procedure in the task."""
    kind = cycle_kind(trigger)
    if kind is None:
        return None
    team, subagent = trigger.team, trigger.subagent
    reason = cycle_readiness(team, kind, subagent)
    if reason:
        CycleRun.objects.create(
            team=team,
            subagent=subagent,
            kind=kind,
            trigger=trigger,
            outcome=CycleRun.Outcome.SKIPPED,
            reason=reason[:500],
            created_at=now,
        )
        logger.warning("%s cycle of %s/%s skipped: %s", kind, team.name, subagent or "team", reason)
        return GateResult(ready=False, reason=reason)
    journal = journal_read(kind, team, subagent)
    topics = pick_topics(team, subagent, journal) if kind == CycleKind.LEARNING else []
    run = CycleRun.objects.create(
        team=team,
        subagent=subagent,
        kind=kind,
        trigger=trigger,
        outcome=CycleRun.Outcome.STARTED,
        topics=topics,
        created_at=now,
    )
    journal.setdefault("entries", []).append(
        {"run": run.pk, "at": now.isoformat(), "topics": topics, "test": test}
    )
    journal_write(kind, team, subagent, journal)
    context = [skill_body(kind), f"Cycle run #{run.pk}."]
    if topics:
        context.append("Topics for this cycle: " + ", ".join(topics) + ".")

    def attach(task: object) -> None:
        CycleRun.objects.filter(pk=run.pk).update(task=task)

    return GateResult(
        ready=True, context="\n\n".join(context), options={"cycle_run": run.pk}, on_task=attach
    )


def current_run(task_id: int | None) -> CycleRun | None:
    """The cycle run a tool call belongs to (through its task)."""
    if task_id is None:
        return None
    return CycleRun.objects.filter(task_id=task_id).select_related("team").first()

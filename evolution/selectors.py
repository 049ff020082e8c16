"""Reads: a team's cycle triggers with their readiness, recent runs, journals and changes."""

from __future__ import annotations

from openhive.core.scrubbing import scrub
from teams.models import Team
from triggers.models import TriggerConfig
from triggers.selectors import trigger_summary

from .models import CycleChange, CycleRun, Learning
from .services.cycles import cycle_kind, cycle_readiness, journal_read

RECENT = 20


def cycle_triggers(team: Team) -> list[tuple[TriggerConfig, str]]:
    triggers = TriggerConfig.objects.filter(team=team).order_by("name")
    return [(t, kind) for t in triggers if (kind := cycle_kind(t))]


def team_learning_overview(team: Team) -> dict:
    """Everything the learning page of a team shows (plain values, scrubbed where free text)."""
    triggers = []
    journals = {}
    for trigger, kind in cycle_triggers(team):
        reason = cycle_readiness(team, kind, trigger.subagent)
        triggers.append(
            {
                "name": trigger.name,
                "kind": kind,
                "subagent": trigger.subagent,
                "state": trigger.state,
                "when": trigger_summary(trigger).get("when", ""),
                "ready": reason is None,
                "not_ready_reason": reason or "",
            }
        )
        journals[f"{kind}:{trigger.subagent}"] = journal_read(kind, team, trigger.subagent)
    runs = CycleRun.objects.filter(team=team)[:RECENT]
    changes = CycleChange.objects.filter(team=team)[:RECENT]
    learnings = Learning.objects.filter(team=team)[:RECENT]
    return {
        "team": team.name,
        "triggers": triggers,
        "runs": [
            {
                "id": r.pk,
                "kind": r.kind,
                "subagent": r.subagent,
                "outcome": r.outcome,
                "reason": scrub(r.reason),
                "topics": r.topics,
                "task_id": r.task_id,
                "created_at": r.created_at.isoformat(),
            }
            for r in runs
        ],
        "journals": journals,
        "learnings": [
            {
                "id": x.pk,
                "subagent": x.subagent,
                "topic": x.topic,
                "confidence": x.confidence,
                "status": x.status,
                "corroborations": x.corroborations,
                "superseded_by": x.superseded_by_id,
                "memory_key": x.memory.key if x.memory_id else None,
            }
            for x in learnings.select_related("memory")
        ],
        "changes": [change_dict(c) for c in changes],
    }


def change_dict(change: CycleChange) -> dict:
    return {
        "id": change.pk,
        "kind": change.kind,
        "subagent": change.subagent,
        "cycle_run": change.cycle_run_id,
        "target_type": change.target_type,
        "target": change.target,
        "identity": change.identity,
        "status": change.status,
        "reason": scrub(change.reason),
        "evidence": change.evidence,
        "created_at": change.created_at.isoformat(),
        "decided_by": change.decided_by,
        "reverted_at": change.reverted_at.isoformat() if change.reverted_at else None,
    }

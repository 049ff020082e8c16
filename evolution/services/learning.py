"""What a learning cycle records: each insight becomes a memory with a confidence, under limits
code enforces (at most `MAX_LEARNINGS` per cycle, `MIN_CONFIDENCE` at least, `high` only with
`HIGH_MIN_SOURCES` sources). A later cycle that agrees with a learning promotes it; one that
contradicts it supersedes it. Every memory write is a `CycleChange` that can be reverted."""

from __future__ import annotations

import re

from django.db import transaction
from django.utils import timezone

from memory.models import Memory
from memory.services import memory_save
from openhive.core.errors import Conflict, DomainError
from openhive.core.scrubbing import scrub

from ..models import CONFIDENCE_ORDER, Confidence, CycleChange, CycleKind, CycleRun, Learning
from .cycles import journal_note

# The reference's defaults (002, autonomous learning).
MAX_LEARNINGS = 5
MIN_CONFIDENCE = Confidence.MEDIUM
HIGH_MIN_SOURCES = 3
STANCES = ("agrees", "contradicts")


def _rank(confidence: str) -> int:
    return CONFIDENCE_ORDER.index(confidence)


def topic_slug(topic: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-")[:80] or "topic"


def learning_key(subagent: str, topic: str) -> str:
    return f"lesson:{subagent or 'team'}:{topic_slug(topic)}"


def _memory_text(learning: Learning) -> str:
    sources = "".join(f"\n- {s}" for s in learning.sources)
    return (
        f"[{learning.confidence} confidence, learned by {learning.subagent or 'the team'}"
        f"{f', corroborated {learning.corroborations}x' if learning.corroborations else ''}] "
        f"{learning.topic}: {learning.insight}" + (f"\nSources:{sources}" if sources else "")
    )


def _write_memory(run: CycleRun, learning: Learning, reason: str, evidence: dict) -> None:
    key = learning_key(learning.subagent, learning.topic)
    current = Memory.objects.filter(team=run.team, key=key, active=True).first()
    result = memory_save(
        team=run.team,
        key=key,
        content=_memory_text(learning),
        type=Memory.Type.LESSON,
        supersede_reason=reason if current else "",
        updated_by=f"{run.team.name}/{learning.subagent}" if learning.subagent else run.team.name,
    )
    learning.memory = result.memory
    learning.save(update_fields=["memory"])
    CycleChange.objects.create(
        team=run.team,
        subagent=run.subagent,
        kind=CycleKind.LEARNING,
        cycle_run=run,
        target_type=CycleChange.Target.MEMORY,
        target=key,
        before=current.content if current else None,
        after=result.memory.content,
        reason=reason,
        evidence={**evidence, "learning_id": learning.pk, "sources": learning.sources},
        status=CycleChange.Status.APPLIED,
        created_at=timezone.now(),
        decided_by="learning-cycle",
    )


@transaction.atomic
def learning_record(
    *,
    run: CycleRun,
    topic: str,
    insight: str,
    confidence: str,
    sources: list[str],
    stance: str | None = None,
) -> tuple[str, Learning]:
    """Record one insight of the cycle. Returns (what happened: recorded | promoted |
    superseded, the learning that now holds the topic)."""
    run = CycleRun.objects.select_for_update().get(pk=run.pk)
    if run.kind != CycleKind.LEARNING:
        raise DomainError("record_learning belongs to learning cycles", code="wrong_cycle")
    # Shown in the admin, the API and (through the memory) in prompts: no known secret stays.
    topic, insight = scrub(topic.strip()), scrub(insight.strip())
    sources = list(dict.fromkeys(scrub(s.strip()) for s in sources if s.strip()))
    if confidence not in Confidence.values:
        raise DomainError(f"confidence must be one of {', '.join(Confidence.values)}")
    if _rank(confidence) < _rank(MIN_CONFIDENCE):
        raise DomainError(
            f"confidence {confidence} is below the minimum ({MIN_CONFIDENCE}): keep researching "
            "or leave this insight out",
            code="low_confidence",
        )
    if confidence == Confidence.HIGH and len(sources) < HIGH_MIN_SOURCES:
        raise DomainError(
            f"high confidence needs at least {HIGH_MIN_SOURCES} distinct sources "
            f"({len(sources)} given): add sources or record it as medium",
            code="too_few_sources",
        )
    # Every learning recorded, promoted or superseding writes exactly one change.
    if run.changes.count() >= MAX_LEARNINGS:
        raise Conflict(
            f"this cycle has recorded its {MAX_LEARNINGS} learnings (the limit per cycle): "
            "finish with your summary",
            code="learning_cap",
        )
    previous = (
        Learning.objects.select_for_update()
        .filter(team=run.team, subagent=run.subagent, topic__iexact=topic)
        .filter(status=Learning.Status.ACTIVE)
        .first()
    )
    now = timezone.now()
    evidence = {"cycle_run": run.pk, "task_id": run.task_id, "topic": topic}
    if previous is not None and previous.cycle_run_id == run.pk:
        raise Conflict(
            f'you recorded "{topic}" in this cycle already (learning #{previous.pk}); one '
            "learning per topic per cycle",
            code="duplicate_topic",
        )
    if previous is not None and stance not in STANCES:
        raise DomainError(
            f'you already hold a learning on "{topic}" ({previous.confidence}): '
            f'"{previous.insight[:300]}". Call again with stance "agrees" (it is promoted) or '
            '"contradicts" (yours supersedes it)',
            code="stance_required",
        )
    if previous is not None and stance == "agrees":
        # What a revert of this promotion puts back.
        evidence["previous"] = {
            "confidence": previous.confidence,
            "corroborations": previous.corroborations,
            "sources": previous.sources,
        }
        previous.sources = list(dict.fromkeys([*previous.sources, *sources]))
        previous.corroborations += 1
        # One step up per corroboration; high still needs its sources.
        step = CONFIDENCE_ORDER[min(_rank(previous.confidence) + 1, len(CONFIDENCE_ORDER) - 1)]
        if step == Confidence.HIGH and len(previous.sources) < HIGH_MIN_SOURCES:
            step = previous.confidence
        previous.confidence = step
        previous.updated_at = now
        previous.save()
        _write_memory(
            run, previous, f"corroborated by cycle #{run.pk}", {**evidence, "promoted": True}
        )
        journal_note(run, promoted=[previous.pk])
        return "promoted", previous
    learning = Learning.objects.create(
        team=run.team,
        subagent=run.subagent,
        topic=topic,
        insight=insight,
        confidence=confidence,
        sources=sources,
        cycle_run=run,
        created_at=now,
        updated_at=now,
    )
    if previous is not None:  # contradicts
        previous.status = Learning.Status.SUPERSEDED
        previous.superseded_by = learning
        previous.updated_at = now
        previous.save()
        _write_memory(
            run,
            learning,
            f"contradicted by cycle #{run.pk}: supersedes learning #{previous.pk}",
            {**evidence, "supersedes": previous.pk},
        )
        journal_note(run, learnings=[learning.pk], superseded=[previous.pk])
        return "superseded", learning
    _write_memory(run, learning, "", evidence)
    journal_note(run, learnings=[learning.pk])
    return "recorded", learning

"""Cycle tools. `record_learning` and `propose_change` work only inside a learning or
reflection cycle's task (the run comes from the task, never from the model's arguments);
`confirm_change` and `reject_change` are the parent orchestrator's answer to an identity
change one of its child teams proposed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.registry import tool
from teams.guards import child_team

from .models import CycleKind, CycleRun
from .services.changes import change_confirm, change_propose, change_reject
from .services.cycles import current_run
from .services.learning import MAX_LEARNINGS, learning_record


def _run(ctx: ToolContext, kind: str, name: str) -> CycleRun:
    run = current_run(ctx.task_id)
    if run is None or run.kind != kind or run.team_id != ctx.team.pk:
        raise DomainError(
            f"{name} works only inside a {kind} cycle (a task started by a {kind}-cycle "
            "trigger); this session is not one",
            code="not_in_cycle",
        )
    return run


class RecordLearningArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str = Field(min_length=1, max_length=200, description="One of this cycle's topics")
    insight: str = Field(min_length=1, max_length=4000, description="What you learned")
    confidence: Literal["low", "medium", "high"] = Field(
        description="medium at least; high needs 3 sources or more"
    )
    sources: list[str] = Field(
        default_factory=list, max_length=20, description="URLs or references you relied on"
    )
    stance: Literal["agrees", "contradicts"] | None = Field(
        None, description="Only when you already hold a learning on this topic"
    )


@tool(
    name="record_learning",
    description=(
        f"Learning cycle only: keep one insight on a topic as a memory with its confidence (at "
        f"most {MAX_LEARNINGS} per cycle; low confidence is refused; high needs 3+ sources). "
        "On a topic you already hold a learning on, say whether you agree (it is promoted) or "
        "contradict it (yours supersedes it)."
    ),
    args=RecordLearningArgs,
)
def record_learning(ctx: ToolContext, args: RecordLearningArgs) -> dict:
    run = _run(ctx, CycleKind.LEARNING, "record_learning")
    outcome, learning = learning_record(
        run=run,
        topic=args.topic,
        insight=args.insight,
        confidence=args.confidence,
        sources=args.sources,
        stance=args.stance,
    )
    return {
        "outcome": outcome,
        "learning_id": learning.pk,
        "confidence": learning.confidence,
        "memory_key": learning.memory.key if learning.memory else None,
    }


class ProposeChangeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1, max_length=300, description="skills/<name>/... or subagents/<name>.md"
    )
    content: str = Field(min_length=1, description="The whole new content of the file")
    reason: str = Field(min_length=1, max_length=2000, description="What the evidence shows")
    task_ids: list[int] = Field(default_factory=list, max_length=50, description="Evidence")
    session_ids: list[int] = Field(default_factory=list, max_length=50, description="Evidence")


@tool(
    name="propose_change",
    description=(
        "Reflection cycle only: make this cycle's ONE change, the whole new content of a skill "
        "file or your subagent file, with the evidence. A file changed recently is refused "
        "(cooldown). A change to a subagent's front matter is sent to your parent to confirm."
    ),
    args=ProposeChangeArgs,
)
def propose_change(ctx: ToolContext, args: ProposeChangeArgs) -> dict:
    run = _run(ctx, CycleKind.REFLECTION, "propose_change")
    change = change_propose(
        run=run,
        path=args.path,
        content=args.content,
        reason=args.reason,
        task_ids=args.task_ids,
        session_ids=args.session_ids,
    )
    return {
        "change_id": change.pk,
        "status": change.status,
        "identity": change.identity,
        "note": "sent to your parent to confirm" if change.identity else "applied",
    }


class DecideChangeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, description="Your child team that proposed the change")
    change_id: int = Field(ge=1)


@tool(
    name="confirm_change",
    description="Apply an identity change one of your child teams' reflection proposed.",
    args=DecideChangeArgs,
    ops="org",
)
def confirm_change(ctx: ToolContext, args: DecideChangeArgs) -> dict:
    team = child_team(ctx, args.team)
    change = change_confirm(change_id=args.change_id, by=ctx.caller, team=team)
    return {"change_id": change.pk, "status": change.status, "target": change.target}


@tool(
    name="reject_change",
    description="Refuse an identity change one of your child teams' reflection proposed.",
    args=DecideChangeArgs,
    ops="org",
)
def reject_change(ctx: ToolContext, args: DecideChangeArgs) -> dict:
    team = child_team(ctx, args.team)
    change = change_reject(change_id=args.change_id, by=ctx.caller, team=team)
    return {"change_id": change.pk, "status": change.status, "target": change.target}

"""What a reflection cycle changes, and undoing any cycle change.

A reflection edits one file per cycle: a skill (`skills/...`) or a subagent file
(`subagents/<name>.md`) of its team. Code enforces it:
- one change per cycle run (a second is refused);
- a cooldown per file: a file changed (proposed or applied) within `COOLDOWN` or by the same
  subagent's previous reflection cycle cannot be changed again;
- an identity change is not applied but proposed to the team's parent (its orchestrator), who
  confirms or rejects it. Identity = a subagent file's front matter (its description, tools,
  provider profile: what work it is routed and what it may do), or creating or deleting a
  subagent file. A subagent's body and any skill are not identity and apply at once.
Revert puts back the content from before (a file, or a memory a learning cycle wrote)."""

from __future__ import annotations

import os
import re
import tempfile
from datetime import timedelta
from pathlib import Path, PurePosixPath

import yaml
from django.db import transaction
from django.utils import timezone

from memory.models import Memory
from memory.services import memory_delete, memory_save
from openhive.core import paths
from openhive.core.errors import Conflict, DomainError, NotAllowed, NotFound
from teams.models import Team
from teams.services import teammessage_send
from teams.subagents import parse_subagent

from ..models import CycleChange, CycleKind, CycleRun, Learning
from .cycles import journal_note

COOLDOWN = timedelta(hours=24)
MAX_FILE_CHARS = 64_000
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def _relative(path: str) -> PurePosixPath:
    rel = PurePosixPath((path or "").strip().replace("\\", "/"))
    if not rel.parts or rel.is_absolute() or ".." in rel.parts:
        raise NotAllowed(f"path {path!r} must be relative to your workspace, without '..'")
    top = rel.parts[0]
    is_subagent = top == "subagents" and len(rel.parts) == 2 and rel.suffix == ".md"
    if not (is_subagent or (top == "skills" and len(rel.parts) >= 3)):
        raise NotAllowed(
            "a reflection changes a skill file (skills/<name>/...) or a subagent file "
            "(subagents/<name>.md), nothing else",
            code="path_not_allowed",
        )
    return rel


def _file(team: Team, rel: PurePosixPath) -> Path:
    root = paths.team_dir(team.name).resolve()
    real = (root / rel).resolve()
    if not real.is_relative_to(root):  # a symlink pointing out of the workspace
        raise NotAllowed(f"{rel} resolves outside your workspace", code="path_outside_boundary")
    return real


def _read(real: Path) -> str | None:
    try:
        return real.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _write(real: Path, content: str | None) -> None:
    """Atomic replace (or removal when content is None)."""
    if content is None:
        real.unlink(missing_ok=True)
        return
    real.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=real.parent, prefix=".change-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(content)
    os.replace(temp, real)


def _front_matter(text: str | None) -> object:
    found = _FRONT_MATTER.match(text or "")
    try:
        return yaml.safe_load(found.group(1)) if found else None
    except yaml.YAMLError:
        return found.group(1) if found else None


def is_identity_change(rel: PurePosixPath, before: str | None, after: str | None) -> bool:
    if rel.parts[0] != "subagents":
        return False
    if before is None or after is None:
        return True
    return _front_matter(before) != _front_matter(after)


def _cooldown_refusal(run: CycleRun, target: str) -> str | None:
    recent = CycleChange.objects.filter(
        team=run.team,
        target_type=CycleChange.Target.FILE,
        target=target,
        created_at__gt=timezone.now() - COOLDOWN,
    ).exclude(status=CycleChange.Status.REJECTED)
    if recent.exists():
        return f"{target} was changed less than {COOLDOWN.total_seconds() / 3600:g} h ago"
    previous = (
        CycleRun.objects.filter(
            team=run.team,
            subagent=run.subagent,
            kind=CycleKind.REFLECTION,
            outcome=CycleRun.Outcome.STARTED,
            created_at__lt=run.created_at,
        )
        .order_by("-created_at", "-id")
        .first()
    )
    if previous and previous.changes.filter(target=target).exists():
        return f"{target} was changed by your previous reflection cycle (#{previous.pk})"
    return None


@transaction.atomic
def change_propose(
    *,
    run: CycleRun,
    path: str,
    content: str,
    reason: str,
    task_ids: list[int],
    session_ids: list[int],
) -> CycleChange:
    """The cycle's one change: applied at once, or proposed to the parent when it touches an
    identity. Refusals change nothing."""
    run = CycleRun.objects.select_for_update().select_related("team").get(pk=run.pk)
    if run.kind != CycleKind.REFLECTION:
        raise DomainError("propose_change belongs to reflection cycles", code="wrong_cycle")
    if not reason.strip():
        raise DomainError("give the reason for the change (what the evidence shows)")
    if len(content) > MAX_FILE_CHARS:
        raise DomainError(f"content is longer than {MAX_FILE_CHARS} characters")
    existing = run.changes.first()
    if existing is not None:
        raise Conflict(
            f"this cycle made its one change already (#{existing.pk} on {existing.target}); "
            "note further ideas in your summary for the next cycle",
            code="one_change_per_cycle",
        )
    rel = _relative(path)
    target = str(rel)
    refusal = _cooldown_refusal(run, target)
    if refusal:
        raise Conflict(f"cooldown: {refusal}; change another file or wait", code="cooldown")
    if rel.parts[0] == "subagents":
        parse_subagent(rel.stem, content)  # an unusable subagent file is refused, not written
    real = _file(run.team, rel)
    before = _read(real)
    if before == content:
        raise DomainError(f"{target} already has this content: nothing to change")
    identity = is_identity_change(rel, before, content)
    change = CycleChange.objects.create(
        team=run.team,
        subagent=run.subagent,
        kind=CycleKind.REFLECTION,
        cycle_run=run,
        target_type=CycleChange.Target.FILE,
        target=target,
        before=before,
        after=content,
        reason=reason.strip(),
        evidence={"task_ids": task_ids, "session_ids": session_ids, "task_id": run.task_id},
        identity=identity,
        status=CycleChange.Status.PROPOSED if identity else CycleChange.Status.APPLIED,
        created_at=timezone.now(),
        decided_by="" if identity else "reflection-cycle",
    )
    if identity:
        parent = run.team.parent
        if parent is None:
            raise NotAllowed("a team without a parent cannot propose identity changes")
        teammessage_send(
            sender=run.team,
            recipient=parent,
            content=(
                f"Reflection of {run.team.name}/{run.subagent} proposes identity change "
                f"#{change.pk} to {target}: {reason.strip()[:500]}\nConfirm with "
                f"confirm_change(team={run.team.name!r}, change_id={change.pk}) or reject "
                "with reject_change."
            ),
            reason="identity change proposed",
            correlation_id=f"cycle-change:{change.pk}",
        )
    else:
        _write(real, content)
        change.decided_at = change.created_at
        change.save(update_fields=["decided_at"])
    journal_note(run, changes=[change.pk])
    return change


def _locked(change_id: int, team: Team | None = None) -> CycleChange:
    rows = CycleChange.objects.select_for_update().select_related("team")
    change = rows.filter(pk=change_id, **({"team": team} if team else {})).first()
    if change is None:
        raise NotFound(f"change #{change_id} not found", code="not_found")
    return change


@transaction.atomic
def change_confirm(*, change_id: int, by: str, team: Team | None = None) -> CycleChange:
    """Apply a proposed identity change (the orchestrator's or an operator's decision). The
    file must still be as it was proposed against, or the proposal is stale."""
    change = _locked(change_id, team)
    if change.status != CycleChange.Status.PROPOSED:
        raise Conflict(f"change #{change.pk} is {change.status}, not proposed", code="not_proposed")
    real = _file(change.team, PurePosixPath(change.target))
    if _read(real) != change.before:
        raise Conflict(
            f"{change.target} changed since the proposal; reject it (the next cycle can propose "
            "again against the current file)",
            code="stale_proposal",
        )
    _write(real, change.after)
    change.status = CycleChange.Status.APPLIED
    change.decided_at, change.decided_by = timezone.now(), by[:200]
    change.save(update_fields=["status", "decided_at", "decided_by"])
    return change


@transaction.atomic
def change_reject(*, change_id: int, by: str, team: Team | None = None) -> CycleChange:
    change = _locked(change_id, team)
    if change.status != CycleChange.Status.PROPOSED:
        raise Conflict(f"change #{change.pk} is {change.status}, not proposed", code="not_proposed")
    change.status = CycleChange.Status.REJECTED
    change.decided_at, change.decided_by = timezone.now(), by[:200]
    change.save(update_fields=["status", "decided_at", "decided_by"])
    return change


@transaction.atomic
def change_revert(*, change_id: int, by: str) -> CycleChange:
    """Put back what the change replaced: the file's previous content (or no file), or the
    memory's previous content (or no memory). Only an applied change can be reverted."""
    change = _locked(change_id)
    if change.status != CycleChange.Status.APPLIED:
        raise Conflict(
            f"change #{change.pk} is {change.status}: only an applied change can be reverted",
            code="not_applied",
        )
    if change.target_type == CycleChange.Target.FILE:
        _write(_file(change.team, PurePosixPath(change.target)), change.before)
    elif change.before is None:
        memory_delete(team=change.team, key=change.target, deleted_by=by[:100])
    else:
        memory_save(
            team=change.team,
            key=change.target,
            content=change.before,
            type=Memory.Type.LESSON,
            supersede_reason=f"revert of cycle change #{change.pk}",
            updated_by=by[:100],
        )
    evidence = change.evidence or {}
    if evidence.get("learning_id") and (change.before is None or evidence.get("supersedes")):
        Learning.objects.filter(pk=evidence["learning_id"]).update(status=Learning.Status.REVERTED)
    if evidence.get("promoted") and evidence.get("previous"):  # the promotion is undone
        Learning.objects.filter(pk=evidence["learning_id"]).update(**evidence["previous"])
    if evidence.get("supersedes"):  # the contradicted learning holds its topic again
        Learning.objects.filter(pk=evidence["supersedes"]).update(
            status=Learning.Status.ACTIVE, superseded_by=None
        )
    change.status = CycleChange.Status.REVERTED
    change.reverted_at, change.reverted_by = timezone.now(), by[:200]
    change.save(update_fields=["status", "reverted_at", "reverted_by"])
    return change

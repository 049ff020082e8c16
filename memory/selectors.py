"""Reads of team memory. Every function takes the team: no read crosses teams."""

from __future__ import annotations

from django.db.models import Case, IntegerField, QuerySet, Value, When

from openhive.core.compiled import CompiledQuery
from openhive.core.context import TeamRef
from openhive.core.reads import Read
from teams.models import Team

from .models import Memory

INJECTED_TYPES = (
    Memory.Type.IDENTITY,
    Memory.Type.LESSON,
    Memory.Type.DECISION,
    Memory.Type.CONTEXT,
)
INJECTION_CAP = 50


def _type_rank() -> Case:
    return Case(
        *[When(type=t, then=Value(i)) for i, t in enumerate(INJECTED_TYPES)],
        default=Value(len(INJECTED_TYPES)),
        output_field=IntegerField(),
    )


def memory_list(*, team: Team, type: str | None = None) -> QuerySet[Memory]:
    """Active entries of the team (optionally of one type), by key."""
    rows = Memory.objects.filter(team=team, active=True)
    if type:
        rows = rows.filter(type=type)
    return rows.order_by("key")


def _injectable(team_id: int, cap: int = INJECTION_CAP) -> QuerySet[Memory]:
    return (
        Memory.objects.filter(team_id=team_id, active=True, type__in=INJECTED_TYPES)
        .annotate(type_rank=_type_rank())
        .order_by("type_rank", "-updated_at", "-pk")[:cap]
    )


_INJECTABLE = CompiledQuery(_injectable)  # every session's prompt reads it


def memory_injectable(*, team: Team, cap: int = INJECTION_CAP) -> list[Memory]:
    """What goes into the team's prompt: active identity, lesson, decision and context entries.
    Over the cap, the more fundamental types win, then the most recently updated. The result is
    in a stable order (type, then key), so the prompt only changes when memory does."""
    if cap == INJECTION_CAP:
        chosen = _INJECTABLE.rows(Memory, team_id=team.pk)
    else:
        chosen = list(_injectable(team.pk, cap))
    return _in_prompt_order(chosen)


def memory_injectable_read(team: TeamRef) -> Read:
    """`memory_injectable(team=team)` as a read a session's start sends with its others."""
    return Read.of(Memory, *_INJECTABLE.sql(team_id=team.pk), then=_in_prompt_order)


def _in_prompt_order(chosen: list[Memory]) -> list[Memory]:
    return sorted(chosen, key=lambda m: (m.type_rank, m.key))


def memory_get(*, team: Team, pk: int) -> Memory | None:
    return Memory.objects.filter(team=team, pk=pk).first()


def memory_history(*, memory: Memory) -> list[Memory]:
    """Every version of the entry's key in the same team, newest first (supersede chain)."""
    return list(
        Memory.objects.filter(team_id=memory.team_id, key=memory.key).order_by("-created_at", "-pk")
    )


def memory_rows(
    *, team: Team, type: str | None = None, status: str | None = None
) -> QuerySet[Memory]:
    """A team's entries for the operator's list: by type and by status (active, superseded,
    deleted), ordered by key then newest first."""
    rows = Memory.objects.filter(team=team)
    if type:
        rows = rows.filter(type=type)
    if status == "active":
        rows = rows.filter(active=True)
    elif status == "superseded":
        rows = rows.filter(active=False, deleted_at__isnull=True)
    elif status == "deleted":
        rows = rows.filter(deleted_at__isnull=False)
    return rows.order_by("key", "-created_at", "-pk")

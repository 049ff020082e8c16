"""Reads of team memory. Every function takes the team: no read crosses teams."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import Case, IntegerField, QuerySet, Value, When

from openhive.core.compiled import CompiledQuery
from openhive.core.context import TeamRef
from openhive.core.reads import Read
from teams.models import Team

from .models import VECTOR_INDEX, Memory

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


@dataclass(frozen=True)
class VectorIndexFit:
    """The vector index's size beside the PostgreSQL server's shared_buffers, in bytes."""

    index_bytes: int
    buffer_bytes: int

    def problem(self) -> str | None:
        """What an operator should change, when the index outgrows the buffers. An HNSW search
        visits pages spread over the whole graph: pages outside shared_buffers are copied in
        from the OS cache (or the disk) at every search. At 100k chunks of a team among 200k (a
        391 MB index) p50 went from 8.3 ms with 128 MB of buffers to 6.6 ms with 1 GB
        (benchmarks/memory_search.py, the same 2-core machine)."""
        if self.index_bytes <= self.buffer_bytes:
            return None
        return (
            f"the memory vector index ({_mb(self.index_bytes)}) is larger than PostgreSQL's "
            f"shared_buffers ({_mb(self.buffer_bytes)}): each memory search reads index pages "
            f"from outside the server's buffers; set shared_buffers to at least "
            f"{_mb(self.index_bytes)} in postgresql.conf and restart the server"
        )


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


def vector_index_fit() -> VectorIndexFit | None:
    """PostgreSQL only (None elsewhere, or while the index does not exist): two catalogue
    reads, no scan."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_relation_size(to_regclass(%s)), "
            "pg_size_bytes(current_setting('shared_buffers'))",
            [VECTOR_INDEX],
        )
        index_bytes, buffer_bytes = cursor.fetchone()
    if index_bytes is None:
        return None
    return VectorIndexFit(index_bytes=int(index_bytes), buffer_bytes=int(buffer_bytes))

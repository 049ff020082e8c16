"""REST: a team's memory (/api/v1/memories). Every call names one team; nothing crosses teams.
Content passes through the scrubber on the way out."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from openhive.core.api import Page
from openhive.core.errors import NotFound
from openhive.core.scrubbing import scrub
from teams.selectors import team_get_or_404

from .models import Memory
from .search import MAX_RESULTS, memory_search
from .selectors import memory_get, memory_history, memory_rows
from .services import memory_type_resolve

router = Router(tags=["memories"])

StatusFilter = Literal["active", "superseded", "deleted", "all"]


class MemoryOut(Schema):
    id: int
    team: str
    key: str
    content: str
    type: str
    status: str
    supersede_reason: str
    superseded_by: int | None
    updated_by: str
    created_at: datetime
    updated_at: datetime


class MemoryFilters(Schema):
    team: str = Field(..., min_length=1, max_length=64, description="team name (required)")
    type: str | None = Field(None, max_length=20, description="a type or alias")
    status: StatusFilter = "active"
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=1_000_000_000)


class MemoryPage(Page):
    items: list[MemoryOut]


class SearchFilters(Schema):
    team: str = Field(..., min_length=1, max_length=64, description="team name (required)")
    q: str = Field(..., min_length=1, max_length=2000, description="the query")
    limit: int = Field(5, ge=1, le=MAX_RESULTS)


class SearchHitOut(Schema):
    score: float
    matched: str
    snippet: str
    memory: MemoryOut


class SearchOut(Schema):
    search_mode: str
    note: str
    results: list[SearchHitOut]


def memory_out(memory: Memory, team_name: str) -> dict:
    return {
        "id": memory.pk,
        "team": team_name,
        "key": memory.key,
        "content": scrub(memory.content),
        "type": memory.type,
        "status": memory.status,
        "supersede_reason": scrub(memory.supersede_reason),
        "superseded_by": memory.superseded_by_id,
        "updated_by": memory.updated_by,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }


@router.get("", response=MemoryPage, summary="A team's memory entries")
def memories_list(request: HttpRequest, filters: Query[MemoryFilters]) -> dict:
    team = team_get_or_404(name=filters.team)
    kind = memory_type_resolve(filters.type) if filters.type else None
    rows = memory_rows(team=team, type=kind, status=filters.status)
    page = rows[filters.offset : filters.offset + filters.limit]
    return {
        "count": rows.count(),
        "limit": filters.limit,
        "offset": filters.offset,
        "items": [memory_out(m, team.name) for m in page],
    }


@router.get("/search", response=SearchOut, summary="Hybrid search in a team's memory")
def memories_search(request: HttpRequest, filters: Query[SearchFilters]) -> dict:
    team = team_get_or_404(name=filters.team)
    found = memory_search(team=team, query=filters.q, limit=filters.limit)
    return {
        "search_mode": found.mode,
        "note": found.note,
        "results": [
            {
                "score": hit.score,
                "matched": hit.matched,
                "snippet": scrub(hit.snippet),
                "memory": memory_out(hit.memory, team.name),
            }
            for hit in found.hits
        ],
    }


@router.get("/{memory_id}/history", response=list[MemoryOut], summary="Versions of an entry")
def memories_history(
    request: HttpRequest, memory_id: int, team: str = Query(..., min_length=1, max_length=64)
) -> list[dict]:
    owner = team_get_or_404(name=team)
    memory = memory_get(team=owner, pk=memory_id) if 0 < memory_id < 2**63 else None
    if memory is None:
        raise NotFound(f"memory {memory_id} not found in team {owner.name}")
    return [memory_out(m, owner.name) for m in memory_history(memory=memory)]

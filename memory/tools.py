"""Memory tools: save, delete, list and search the calling team's memory (never another's)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.registry import tool

from .models import Memory
from .search import MAX_RESULTS, memory_search
from .selectors import memory_list
from .services import memory_delete, memory_save, memory_type_resolve

TYPE_HELP = (
    "identity, lesson, decision, context (these four are in your prompt), reference or "
    "historical (search only); aliases such as insight→lesson or archive→historical work"
)


def entry_dict(memory: Memory) -> dict:
    return {
        "id": memory.pk,
        "key": memory.key,
        "content": memory.content,
        "type": memory.type,
        "status": memory.status,
        "supersede_reason": memory.supersede_reason,
        "updated_by": memory.updated_by,
        "updated_at": memory.updated_at.isoformat(),
    }


class MemorySaveArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="Short stable name of the entry")
    content: str = Field(min_length=1, description="What to remember")
    type: str = Field(
        default="", description=TYPE_HELP + "; empty: context, or the replaced entry's type"
    )
    supersede_reason: str = Field(
        default="", description="Required to replace an active entry with the same key: why"
    )


@tool(
    name="memory_save",
    description=(
        "Save something your team should remember across sessions. Replacing an active entry "
        "needs supersede_reason; the old one stays searchable, marked superseded."
    ),
    args=MemorySaveArgs,
)
def memory_save_tool(ctx: ToolContext, args: MemorySaveArgs) -> dict:
    saved = memory_save(
        team=ctx.team,
        key=args.key,
        content=args.content,
        type=args.type,
        supersede_reason=args.supersede_reason,
        updated_by=ctx.caller,
    )
    result = {"entry": entry_dict(saved.memory), "unchanged": not saved.created}
    if saved.superseded is not None:
        result["superseded_id"] = saved.superseded.pk
    return result


class MemoryDeleteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="Key of the entry to forget")


@tool(
    name="memory_delete",
    description="Forget an entry (all its versions leave search and your prompt).",
    args=MemoryDeleteArgs,
)
def memory_delete_tool(ctx: ToolContext, args: MemoryDeleteArgs) -> dict:
    return {"deleted": memory_delete(team=ctx.team, key=args.key, deleted_by=ctx.caller)}


class MemoryListArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(default="", description="Only this type (aliases work); empty for all")


@tool(
    name="memory_list", description="List your team's active memory entries.", args=MemoryListArgs
)
def memory_list_tool(ctx: ToolContext, args: MemoryListArgs) -> dict:
    kind = memory_type_resolve(args.type) if args.type.strip() else None
    entries = [entry_dict(m) for m in memory_list(team=ctx.team, type=kind)]
    return {"entries": entries, "count": len(entries)}


class MemorySearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000, description="What you are looking for")
    max_results: int = Field(default=5, ge=1, le=MAX_RESULTS)


@tool(
    name="memory_search",
    description=(
        "Search your team's memory by meaning and words, best match first. Returns active and "
        "superseded entries (status says which)."
    ),
    args=MemorySearchArgs,
)
def memory_search_tool(ctx: ToolContext, args: MemorySearchArgs) -> dict:
    found = memory_search(team=ctx.team, query=args.query, limit=args.max_results)
    result = {
        "search_mode": found.mode,
        "results": [
            {
                "key": hit.memory.key,
                "type": hit.memory.type,
                "status": hit.memory.status,
                "is_active": hit.memory.active,
                "snippet": hit.snippet,
                "score": hit.score,
                "matched": hit.matched,
            }
            for hit in found.hits
        ],
    }
    if found.note:
        result["note"] = found.note
    return result

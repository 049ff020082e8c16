"""History tools: search_history and read_history_entry, over the calling team's own past
(its finished sessions, and the chat topics it took part in; never another team's). A family
of its own because it reads two apps: sessions and their ranking live in memory, topics in
chat."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memory.history import (
    MAX_HISTORY_RESULTS,
    history_terms,
    session_history_docs,
    session_history_entry,
)
from memory.history_vectors import VECTOR_POOL, history_hybrid_search
from openhive.chat.selectors import topic_history_docs, topic_history_entry
from openhive.core.context import ToolContext
from openhive.core.registry import tool


class SearchHistoryArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2000, description="Words to look for")
    limit: int = Field(default=5, ge=1, le=MAX_HISTORY_RESULTS)


@tool(
    name="search_history",
    description=(
        "Search your team's past by words and meaning, best match first: its finished "
        "sessions (what it was asked, what it answered) and the chat topics it took part in. "
        "Each result has a kind and an id for read_history_entry."
    ),
    args=SearchHistoryArgs,
)
def search_history(ctx: ToolContext, args: SearchHistoryArgs) -> dict:
    team_id, terms = ctx.team.pk, history_terms(args.query)
    text_docs = session_history_docs(
        team_id=team_id, terms=terms, exclude_session_id=ctx.session_id
    ) + topic_history_docs(team_id=team_id, terms=terms)
    # The vector half compares the query with the team's newest documents whatever their words.
    recent_docs = session_history_docs(
        team_id=team_id, terms=None, exclude_session_id=ctx.session_id, limit=VECTOR_POOL
    ) + topic_history_docs(team_id=team_id, terms=None, limit=VECTOR_POOL)
    hits, mode = history_hybrid_search(
        team_id=team_id,
        query=args.query,
        text_docs=text_docs,
        recent_docs=recent_docs,
        limit=args.limit,
    )
    return {
        "search_mode": mode,
        "results": [
            {
                "kind": hit.doc.kind,
                "id": hit.doc.id,
                "date": hit.doc.date.isoformat(),
                "title": hit.doc.title,
                "snippet": hit.snippet,
                "score": hit.score,
                "matched": hit.matched,
            }
            for hit in hits
        ],
    }


class ReadHistoryEntryArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["session", "topic"] = Field(description="As search_history returned it")
    id: int = Field(ge=1, description="As search_history returned it")


@tool(
    name="read_history_entry",
    description=(
        "Read one entry of your team's history found by search_history: a session's ask and "
        "answer, or a topic's latest messages (long text is cut; `truncated` says so)."
    ),
    args=ReadHistoryEntryArgs,
)
def read_history_entry(ctx: ToolContext, args: ReadHistoryEntryArgs) -> dict:
    if args.kind == "session":
        return session_history_entry(team_id=ctx.team.pk, session_id=args.id)
    return topic_history_entry(team_id=ctx.team.pk, topic_id=args.id)

"""History tools: search_history and read_history_entry, over the calling team's own past
(its finished sessions, and the chat topics it took part in; never another team's). A family
of its own because it reads two apps: sessions and their ranking live in memory, topics in
chat."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memory.history import (
    MAX_HISTORY_RESULTS,
    history_search,
    history_terms,
    session_history_docs,
    session_history_entry,
)
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
        "Search your team's past by words, best match first: its finished sessions (what it "
        "was asked, what it answered) and the chat topics it took part in. Each result has a "
        "kind and an id for read_history_entry."
    ),
    args=SearchHistoryArgs,
)
def search_history(ctx: ToolContext, args: SearchHistoryArgs) -> dict:
    terms = history_terms(args.query)
    hits = history_search(
        query=args.query,
        sessions=session_history_docs(
            team_id=ctx.team.pk, terms=terms, exclude_session_id=ctx.session_id
        ),
        topics=topic_history_docs(team_id=ctx.team.pk, terms=terms),
        limit=args.limit,
    )
    return {
        "search_mode": "full_text_only",
        "results": [
            {
                "kind": hit.doc.kind,
                "id": hit.doc.id,
                "date": hit.doc.date.isoformat(),
                "title": hit.doc.title,
                "snippet": hit.snippet,
                "score": hit.score,
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

"""A team's own past: its finished sessions (what it was asked, what it answered) and the chat
topics its sessions served, searched by words.

History is not indexed like memory: there is no chunk table per session or topic. A search
first narrows the team's rows in the database (any query word, case-insensitive, newest
`MAX_CANDIDATES` of each kind), then ranks those few in Python with BM25 over the same query
words as memory search (`query_terms`: words only, no query operator reaches the database),
sessions and topics in one pool. The vector half (`history_vectors`) adds what is worded
differently, from stored embeddings of the team's newest documents."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_

from django.db.models import Q

from openhive.core.errors import DomainError, NotFound
from openhive.core.scrubbing import scrub
from openhive.engine.models import Session

from .search import query_terms

MAX_CANDIDATES = 300
MAX_HISTORY_RESULTS = 20
SNIPPET_CHARS = 300
ENTRY_CHARS = 20_000
_BM25_K1, _BM25_B = 1.2, 0.75


@dataclass
class HistoryDoc:
    kind: str  # "session" or "topic"
    id: int
    date: datetime
    title: str
    text: str


@dataclass
class HistoryHit:
    doc: HistoryDoc
    score: float
    snippet: str
    matched: str = "text"  # text | vector | both


def history_terms(query: str) -> list[str]:
    if not (query or "").strip():
        raise DomainError("query must not be empty", code="invalid_query")
    terms = query_terms(query)
    if not terms:
        raise DomainError("query needs at least one word (letters or digits)", code="invalid_query")
    return terms


def any_term(fields: list[str], terms: list[str]) -> Q:
    """Rows whose any field contains any term (case-insensitive)."""
    return reduce(or_, (Q(**{f"{field}__icontains": t}) for field in fields for t in terms))


def bm25_rank(docs: list[HistoryDoc], terms: list[str]) -> list[tuple[HistoryDoc, float]]:
    """Docs matching at least one whole query word, best first (ties: newest first)."""
    tokenised = [re.findall(r"\w+", f"{d.title} {d.text}".lower()) for d in docs]
    if not tokenised:
        return []
    average = sum(len(t) for t in tokenised) / len(tokenised) or 1.0
    counts = [dict.fromkeys(terms, 0) for _ in docs]
    for words, count in zip(tokenised, counts, strict=True):
        for word in words:
            if word in count:
                count[word] += 1
    idf = {}
    for term in terms:
        having = sum(1 for c in counts if c[term])
        idf[term] = math.log(1 + (len(docs) - having + 0.5) / (having + 0.5))
    ranked = []
    for doc, words, count in zip(docs, tokenised, counts, strict=True):
        score = 0.0
        norm = _BM25_K1 * (1 - _BM25_B + _BM25_B * len(words) / average)
        for term in terms:
            tf = count[term]
            if tf:
                score += idf[term] * tf * (_BM25_K1 + 1) / (tf + norm)
        if score > 0:
            ranked.append((doc, score))
    ranked.sort(key=lambda item: (-item[1], -item[0].date.timestamp(), -item[0].id))
    return ranked


def snippet(text: str, terms: list[str]) -> str:
    """A scrubbed window of the text around its first matching word."""
    clean = " ".join(scrub(text).split())
    match = re.search(r"\b(" + "|".join(map(re.escape, terms)) + r")\b", clean, re.IGNORECASE)
    start = max(0, (match.start() if match else 0) - SNIPPET_CHARS // 3)
    piece = clean[start : start + SNIPPET_CHARS]
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(clean) else "")


def history_search(
    *, query: str, sessions: list[HistoryDoc], topics: list[HistoryDoc], limit: int
) -> list[HistoryHit]:
    """Sessions and topics ranked together, in one BM25 pool: a rank fusion of two per-kind
    lists would tie their first places whatever their match."""
    if not 1 <= limit <= MAX_HISTORY_RESULTS:
        raise DomainError(
            f"limit must be between 1 and {MAX_HISTORY_RESULTS}", code="invalid_limit"
        )
    terms = history_terms(query)
    ranked = bm25_rank(sessions + topics, terms)[:limit]
    return [
        HistoryHit(doc=doc, score=round(score, 4), snippet=snippet(doc.text, terms))
        for doc, score in ranked
    ]


def _session_doc(session: Session) -> HistoryDoc:
    asked = session.task.text if session.task_id and session.task else ""
    parts = [f"Asked: {asked}" if asked else "", f"Answer: {session.final_text}"]
    return HistoryDoc(
        kind="session",
        id=session.pk,
        date=session.finished_at or session.started_at,
        title=f"{session.kind} session",
        text="\n\n".join(p for p in parts if p),
    )


def session_history_docs(
    *,
    team_id: int,
    terms: list[str] | None,
    exclude_session_id: int | None = None,
    limit: int = MAX_CANDIDATES,
) -> list[HistoryDoc]:
    """The team's finished sessions that mention any term (all of them with `terms=None`, for
    the vector half), newest first (bounded)."""
    rows = Session.objects.filter(team_id=team_id, finished_at__isnull=False)
    if terms is not None:
        rows = rows.filter(any_term(["final_text", "task__text"], terms))
    rows = (
        rows.exclude(pk=exclude_session_id or 0)
        .select_related("task")
        .order_by("-finished_at", "-id")[:limit]
    )
    return [_session_doc(s) for s in rows]


def session_history_entry(*, team_id: int, session_id: int) -> dict:
    """One of the team's own sessions, scrubbed and capped; another team's is not found."""
    session = Session.objects.filter(team_id=team_id, pk=session_id).select_related("task").first()
    if session is None:
        raise NotFound(
            f"session {session_id} is not in your team's history (search_history lists it)",
            code="not_found",
        )
    doc = _session_doc(session)
    return {
        "kind": "session",
        "id": session.pk,
        "date": doc.date.isoformat(),
        "session_kind": session.kind,
        "task_id": session.task_id,
        "stop_reason": session.stop_reason,
        **capped(doc.text),
    }


def capped(text: str, *, keep_end: bool = False) -> dict:
    """Scrubbed text within ENTRY_CHARS: a session keeps its start (the ask), a conversation
    its end (the latest exchange)."""
    clean = scrub(text)
    if len(clean) <= ENTRY_CHARS:
        return {"text": clean, "truncated": False}
    return {"text": clean[-ENTRY_CHARS:] if keep_end else clean[:ENTRY_CHARS], "truncated": True}

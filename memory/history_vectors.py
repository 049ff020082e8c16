"""The vector half of search_history: a team's recent history documents embedded with the
memory search's model (`embeddings.get_embedder`, the offline MiniLM by default), compared with
the query by cosine, fused with the BM25 ranking by Reciprocal Rank Fusion. It finds a past
session worded differently from the query ("the database ran out of space" for "disk full"),
which words alone miss.

Vectors are stored (`HistoryVector`) and made lazily by the searches themselves: each search
embeds at most `EMBED_PER_SEARCH` of the team's newest documents not embedded yet (or whose
text changed), so a cold team's first searches cost a bounded amount and later ones only the
query's embedding. Only the newest `VECTOR_POOL` documents of each kind take part: history
search favours recent work, and an exact scan of a few hundred vectors is cheap."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.db import connection
from pgvector.django import CosineDistance

from openhive.core.errors import DomainError

from . import embeddings
from .chunking import content_hash
from .history import (
    MAX_HISTORY_RESULTS,
    HistoryDoc,
    HistoryHit,
    bm25_rank,
    history_terms,
    snippet,
)
from .models import HistoryVector
from .search import MIN_VECTOR_SIMILARITY, RRF_K

if TYPE_CHECKING:  # numpy loads with the first search: a worker that never searches skips it
    import numpy as np

logger = logging.getLogger(__name__)

VECTOR_POOL = 200
EMBED_PER_SEARCH = 8
# The ask and the start of the answer carry the meaning; MiniLM's cost grows with the tokens.
EMBED_CHARS = 600


def _doc_text(doc: HistoryDoc) -> str:
    return f"{doc.title}\n{doc.text}"[:EMBED_CHARS]


def _refresh(team_id: int, docs: list[HistoryDoc], embedder, budget: int | None = None) -> int:
    """Embed (newest first, at most `budget`, by default EMBED_PER_SEARCH) the docs with no
    vector or a stale one; the count. Reads hashes only, never the vectors."""
    budget = EMBED_PER_SEARCH if budget is None else budget
    stored = {
        (kind, object_id): digest
        for kind, object_id, digest in HistoryVector.objects.filter(
            team_id=team_id, embedding_model=embedder.name, object_id__in={d.id for d in docs}
        ).values_list("kind", "object_id", "content_hash")
    }
    missing: list[tuple[HistoryDoc, str]] = []
    for doc in sorted(docs, key=lambda d: d.date, reverse=True):
        digest = content_hash(_doc_text(doc))
        if stored.get((doc.kind, doc.id)) != digest:
            missing.append((doc, digest))
            if len(missing) >= budget:
                break
    if missing:
        fresh = embedder.embed([_doc_text(doc) for doc, _ in missing])
        for (doc, digest), vector in zip(missing, fresh, strict=True):
            HistoryVector.objects.update_or_create(
                team_id=team_id,
                kind=doc.kind,
                object_id=doc.id,
                embedding_model=embedder.name,
                defaults={"content_hash": digest, "embedding": vector},
            )
    return len(missing)


def _similarities(
    team_id: int, docs: list[HistoryDoc], model: str, query: np.ndarray
) -> dict[tuple[str, int], float]:
    """Cosine similarity of each doc's stored vector to the query (vectors are normalised).
    PostgreSQL computes it in SQL (parsing hundreds of vectors' text costs more than the
    search); SQLite reads the raw float32 blobs into one numpy matrix."""
    rows = HistoryVector.objects.filter(
        team_id=team_id, embedding_model=model, object_id__in={d.id for d in docs}
    )
    if connection.vendor == "postgresql":
        found = rows.annotate(distance=CosineDistance("embedding", query)).values_list(
            "kind", "object_id", "distance"
        )
        return {(kind, pk): 1.0 - float(distance) for kind, pk, distance in found}
    with connection.cursor() as cursor:
        sql, params = rows.values_list("kind", "object_id", "embedding").query.sql_with_params()
        cursor.execute(sql, params)
        found = cursor.fetchall()
    if not found:
        return {}
    import numpy as np

    matrix = np.frombuffer(b"".join(blob for _, _, blob in found), dtype=np.float32)
    scores = matrix.reshape(len(found), -1) @ query
    return {(kind, pk): float(score) for (kind, pk, _), score in zip(found, scores, strict=True)}


def history_vectors_fill(*, team_id: int, docs: list[HistoryDoc]) -> int:
    """Embed every doc not embedded yet (a warm-up, e.g. before a benchmark); the count."""
    embedder = embeddings.get_embedder()
    if embedder is None:
        return 0
    return _refresh(team_id, docs, embedder, budget=len(docs))


def vector_rank(
    *, team_id: int, query: str, docs: list[HistoryDoc]
) -> tuple[list[tuple[HistoryDoc, float]], str]:
    """(docs by cosine similarity to the query, best first, above the memory search's floor;
    the search mode). Without a model, or when it fails: ([], "full_text_only")."""
    embedder = embeddings.get_embedder()
    if embedder is None or not docs:
        return [], "full_text_only" if embedder is None else "hybrid"
    import numpy as np

    try:
        query_vector = np.asarray(embedder.embed([query])[0], dtype=np.float32)
        _refresh(team_id, docs, embedder)
    except embeddings.EmbeddingError as exc:
        logger.warning("history search fell back to full text: %s", exc.message)
        return [], "full_text_only"
    similarities = _similarities(team_id, docs, embedder.name, query_vector)
    ranked = []
    for doc in docs:
        similarity = similarities.get((doc.kind, doc.id))
        if similarity is not None and similarity >= MIN_VECTOR_SIMILARITY:
            ranked.append((doc, similarity))
    ranked.sort(key=lambda item: (-item[1], -item[0].date.timestamp(), -item[0].id))
    return ranked, "hybrid"


def fuse(
    text: list[tuple[HistoryDoc, float]], vector: list[tuple[HistoryDoc, float]]
) -> list[tuple[HistoryDoc, float, str]]:
    """RRF of the two rankings: (doc, fused score, matched: text | vector | both)."""
    scores: dict[tuple[str, int], float] = {}
    docs: dict[tuple[str, int], HistoryDoc] = {}
    seen: dict[tuple[str, int], set[str]] = {}
    for label, ranking in (("text", text), ("vector", vector)):
        for rank, (doc, _score) in enumerate(ranking, start=1):
            key = (doc.kind, doc.id)
            docs[key] = doc
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
            seen.setdefault(key, set()).add(label)
    order = sorted(scores, key=lambda k: (-scores[k], -docs[k].date.timestamp(), -k[1]))
    return [
        (docs[k], scores[k], "both" if len(seen[k]) == 2 else next(iter(seen[k]))) for k in order
    ]


def history_hybrid_search(
    *,
    team_id: int,
    query: str,
    text_docs: list[HistoryDoc],
    recent_docs: list[HistoryDoc],
    limit: int,
) -> tuple[list[HistoryHit], str]:
    """BM25 over the docs that share a word with the query, cosine over the team's recent
    docs, fused: (hits best first, search mode)."""
    if not 1 <= limit <= MAX_HISTORY_RESULTS:
        raise DomainError(
            f"limit must be between 1 and {MAX_HISTORY_RESULTS}", code="invalid_limit"
        )
    terms = history_terms(query)
    text = bm25_rank(text_docs, terms)
    vector, mode = vector_rank(team_id=team_id, query=query, docs=recent_docs)
    fused = fuse(text, vector)[:limit]
    hits = [
        HistoryHit(doc=doc, score=round(score, 6), snippet=snippet(doc.text, terms), matched=how)
        for doc, score, how in fused
    ]
    return hits, mode

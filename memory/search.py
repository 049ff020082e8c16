"""Hybrid memory search, always within one team.

Two ranked candidate lists of chunks, fused with Reciprocal Rank Fusion (score = Σ 1/(60+rank)):
- full text: PostgreSQL tsvector + GIN (`ts_rank`), SQLite FTS5 (`bm25`); any query word may
  match (OR), documents matching more and rarer words rank higher;
- vector: cosine similarity to the query's embedding; PostgreSQL pgvector HNSW with iterative
  scans (the team filter is applied inside the index scan), in one round trip; SQLite an exact
  numpy scan.
A memory's score is its best chunk's. Without an embedding model (or when the model fails) the
search is full text only, and the result says so."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db import connection

from openhive.core.errors import DomainError
from teams.models import Team

from . import embeddings
from .models import Memory, MemoryChunk

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

RRF_K = 60
MAX_QUERY_TERMS = 32
MAX_RESULTS = 50
# Nearest neighbours always exist; below this cosine similarity they are noise, not matches
# (unrelated MiniLM sentences score around 0.0 to 0.15).
MIN_VECTOR_SIMILARITY = 0.2
# At 100k chunks of one team among 200k, with the index of migration 0005 (m 16,
# ef_construction 128), ef_search 100 finds 0.994-0.996 of the exact top 10 and 200 finds
# 0.999-1.000 in the three builds measured; with ef_construction 64 it was 0.94-0.99 at 200
# (benchmarks/memory_search.py).
HNSW_EF_SEARCH = 200
# PostgreSQL's planner prices the exact path (the team's btree index, then sorting by distance)
# as if a distance cost next to nothing, and takes it for teams of up to ~20k chunks: a team of
# 10k chunks among 200k took p50 68 ms that way and 3 ms through HNSW (benchmark, small team).
# Teams this large and this big a share of all chunks are steered to HNSW (enable_sort off).
# Smaller ones keep the planner's choice: the exact scan is cheap there, and an HNSW walk meets
# so few of the team's chunks that it would reach pgvector's hnsw.max_scan_tuples (20,000)
# before it found memory_search's 80 candidates (a 1 % share needs ~8,000).
HNSW_MIN_TEAM_CHUNKS = 2000
HNSW_MIN_TEAM_SHARE = 0.01
TEAM_SIZE_TTL_S = 300.0  # how long a team's counts are trusted (they only steer the plan)
SNIPPET_CHARS = 500


@dataclass
class SearchHit:
    memory: Memory
    score: float
    snippet: str
    matched: str  # "text", "vector" or "both"


@dataclass
class SearchResult:
    mode: embeddings.SearchMode
    hits: list[SearchHit] = field(default_factory=list)
    note: str = ""


def query_terms(query: str) -> list[str]:
    """Words only: no operator of either full-text dialect can reach the database."""
    terms = re.findall(r"\w+", query.lower())
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]


def text_candidates(team: Team, terms: list[str], limit: int) -> list[int]:
    """Chunk ids of the team, best full-text match first."""
    if not terms:
        return []
    if connection.vendor == "postgresql":
        sql = (
            "SELECT id FROM memory_memorychunk, websearch_to_tsquery('english', %s) AS q "
            "WHERE team_id = %s AND search_vector @@ q "
            "ORDER BY ts_rank(search_vector, q, 1) DESC, id DESC LIMIT %s"
        )
        params: list = [" or ".join(terms), team.pk, limit]
    else:
        sql = (
            "SELECT c.id FROM memory_chunk_fts JOIN memory_memorychunk c "
            "ON c.id = memory_chunk_fts.rowid "
            "WHERE memory_chunk_fts MATCH %s AND c.team_id = %s "
            "ORDER BY bm25(memory_chunk_fts), c.id DESC LIMIT %s"
        )
        params = [" OR ".join(f'"{t}"' for t in terms), team.pk, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def vector_candidates(
    team: Team, vector: np.ndarray, model: str, limit: int, *, min_similarity: float = 0.0
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) of the team's chunks embedded by `model`, nearest first."""
    if connection.vendor == "postgresql":
        ranked = _pg_vector_candidates(team, vector, model, limit)
    else:
        # Raw rows and one frombuffer over the joined blobs: per-row conversion through the
        # ORM costs more than the scan itself.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, embedding FROM memory_memorychunk "
                "WHERE team_id = %s AND embedding_model = %s AND embedding IS NOT NULL",
                [team.pk, model],
            )
            rows = cursor.fetchall()
        if not rows:
            return []
        import numpy as np  # here: a worker that never searches by vector does not load it

        ids = np.fromiter((pk for pk, _ in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32)
        scores = matrix.reshape(len(rows), -1) @ np.asarray(vector, dtype=np.float32)
        top = np.argsort(-scores, kind="stable")[:limit]
        ranked = [(int(ids[i]), float(scores[i])) for i in top]
    return [(pk, s) for pk, s in ranked if s >= min_similarity]


# One round trip: the settings and the query go as one simple-query string (client-side
# binding), which PostgreSQL runs as one implicit transaction, so SET LOCAL lasts for exactly
# this query (or, inside an atomic block, to its end; they only steer HNSW scans). Five round
# trips (BEGIN, two SETs, SELECT, COMMIT) through the ORM cost more than the scan on a busy
# machine. Iterative scans keep walking the graph until `limit` rows pass the team filter,
# instead of filtering a fixed ef_search candidate set down to a few.
# (A halfvec expression index over the same graph, benchmarks/memory_search.py --halfvec with
# ef_construction 128, measured recall@10 0.999 in two builds at 223 MB against 391 MB, and
# built ~1.3x slower; not adopted yet: the model's index and this query would both change.)
_PG_VECTOR_SETTINGS = (
    "SET LOCAL hnsw.iterative_scan = 'relaxed_order'; SET LOCAL hnsw.ef_search = %s; "
)
_PG_FORCE_HNSW = "SET LOCAL enable_sort = off; "
_PG_VECTOR_SELECT = (
    "SELECT id, 1 - (embedding <=> %s::vector) FROM memory_memorychunk "
    "WHERE team_id = %s AND embedding_model = %s AND embedding IS NOT NULL "
    "ORDER BY embedding <=> %s::vector LIMIT %s"
)


def _pg_vector_candidates(
    team: Team, vector: Sequence[float], model: str, limit: int
) -> list[tuple[int, float]]:
    values = vector.tolist() if hasattr(vector, "tolist") else list(vector)
    literal = "[" + ",".join(format(x, ".9g") for x in values) + "]"  # float32 round-trips
    ef_search = max(HNSW_EF_SEARCH, limit)
    settings = _PG_VECTOR_SETTINGS
    team_chunks, all_chunks = _team_chunk_count(team.pk)
    if team_chunks >= max(HNSW_MIN_TEAM_CHUNKS, all_chunks * HNSW_MIN_TEAM_SHARE):
        settings += _PG_FORCE_HNSW
    with connection.cursor() as cursor:
        cursor.execute(
            settings + _PG_VECTOR_SELECT,
            [ef_search, literal, team.pk, model, literal, limit],
        )
        raw = cursor.cursor
        while raw.description is None and raw.nextset():  # past the two SETs' results
            pass
        rows = raw.fetchall()
    # relaxed_order may return neighbours slightly out of order: sort them exactly.
    return sorted(((pk, float(similarity)) for pk, similarity in rows), key=lambda r: -r[1])


_team_sizes: dict[int, tuple[tuple[int, float], float]] = {}
_team_sizes_lock = threading.Lock()
_monotonic = time.monotonic  # tests step their own clock


def _team_chunk_count(team_id: int) -> tuple[int, float]:
    """(the team's chunks, all chunks as the planner estimates them), at most TEAM_SIZE_TTL_S
    old: one count per team and process every few minutes, not a second round trip per search.
    PostgreSQL only."""
    now = _monotonic()
    with _team_sizes_lock:
        cached = _team_sizes.get(team_id)
    if cached is not None and now - cached[1] < TEAM_SIZE_TTL_S:
        return cached[0]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), (SELECT reltuples FROM pg_class WHERE oid = %s::regclass) "
            "FROM memory_memorychunk WHERE team_id = %s",
            [MemoryChunk._meta.db_table, team_id],
        )
        team_chunks, estimated_all = cursor.fetchone()
    counts = (int(team_chunks), max(float(estimated_all or 0), float(team_chunks)))
    with _team_sizes_lock:
        _team_sizes[team_id] = (counts, now)
    return counts


def rrf_fuse(*rankings: list[int], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal Rank Fusion of ranked id lists (rank 1 = best)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def memory_search(*, team: Team, query: str, limit: int = 5) -> SearchResult:
    """The team's best-matching memories (active and superseded, never deleted), best first."""
    query = (query or "").strip()
    if not query:
        raise DomainError("query must not be empty", code="invalid_query")
    if not 1 <= limit <= MAX_RESULTS:
        raise DomainError(f"max_results must be between 1 and {MAX_RESULTS}", code="invalid_limit")
    pool = max(limit * 8, 40)
    text_ids = text_candidates(team, query_terms(query), pool)
    result = SearchResult(mode="full_text_only")
    vector_ids: list[int] = []
    embedder = embeddings.get_embedder()
    if embedder is None:
        result.note = "no embedding model configured: full-text search only"
    else:
        try:
            query_vector = embedder.embed([query])[0]
        except embeddings.EmbeddingError as exc:
            logger.warning("memory search fell back to full text: %s", exc.message)
            result.note = "the embedding model failed: full-text search only"
        else:
            result.mode = "hybrid"
            vector_ids = [
                pk
                for pk, _ in vector_candidates(
                    team, query_vector, embedder.name, pool, min_similarity=MIN_VECTOR_SIMILARITY
                )
            ]
    fused = rrf_fuse(text_ids, vector_ids)
    if not fused:
        return result
    text_set, vector_set = set(text_ids), set(vector_ids)
    chunks = {
        c.pk: c
        for c in MemoryChunk.objects.filter(team=team, pk__in=fused).only(
            "pk", "memory_id", "content"
        )
    }
    best: dict[int, tuple[float, int]] = {}  # memory id → (score, chunk id)
    for chunk_id, score in fused.items():
        chunk = chunks.get(chunk_id)
        if chunk is None:  # deleted meanwhile
            continue
        previous = best.get(chunk.memory_id)
        if previous is None or score > previous[0]:
            best[chunk.memory_id] = (score, chunk_id)
    order = sorted(best.items(), key=lambda item: (-item[1][0], -item[0]))[:limit]
    memories = Memory.objects.in_bulk([memory_id for memory_id, _ in order])
    for memory_id, (score, chunk_id) in order:
        memory = memories.get(memory_id)
        if memory is None or memory.team_id != team.pk or memory.deleted_at is not None:
            continue
        in_text, in_vector = chunk_id in text_set, chunk_id in vector_set
        result.hits.append(
            SearchHit(
                memory=memory,
                score=round(score, 6),
                snippet=chunks[chunk_id].content[:SNIPPET_CHARS],
                matched="both" if in_text and in_vector else ("text" if in_text else "vector"),
            )
        )
    return result

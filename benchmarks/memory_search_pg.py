"""PostgreSQL index helpers of benchmarks/memory_search.py: build the HNSW index with given
parameters (as a migration would, timed) and describe the one in place."""

from __future__ import annotations

import time

DIM = 384


def hnsw_index(m: int | None, ef_construction: int | None):
    """The model's HNSW index, with `m` / `ef_construction` overridden where given."""
    from memory.models import MemoryChunk

    model_index = next(
        i for i in MemoryChunk._meta.indexes if i.name.startswith("memory_chunk_hnsw")
    )
    _, args, kwargs = model_index.deconstruct()
    if m is not None:
        kwargs["m"] = m
    if ef_construction is not None:
        kwargs["ef_construction"] = ef_construction
    return type(model_index)(*args, **kwargs)


# --halfvec: the same graph over half-precision copies of the vectors (an expression index), and
# the search ordered by that expression; similarities are still computed in full precision.
HALFVEC_SELECT = (
    "SELECT id, 1 - (embedding <=> %s::vector) FROM memory_memorychunk "
    "WHERE team_id = %s AND embedding_model = %s AND embedding IS NOT NULL "
    f"ORDER BY embedding::halfvec({DIM}) <=> %s::halfvec({DIM}) LIMIT %s"
)


def build_hnsw(hnsw, maintenance_work_mem: str, halfvec: bool = False) -> float:
    """(Re)build the HNSW index as a migration would; returns seconds."""
    from django.db import connection

    from memory.models import MemoryChunk

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {hnsw.name}")
        if maintenance_work_mem != "server":
            cursor.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        else:
            cursor.execute("RESET maintenance_work_mem")
    if halfvec:
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE INDEX {hnsw.name} ON memory_memorychunk USING hnsw "
                f"((embedding::halfvec({DIM})) halfvec_cosine_ops) "
                f"WITH (m = {hnsw.m}, ef_construction = {hnsw.ef_construction})"
            )
    else:
        with connection.schema_editor() as editor:
            editor.add_index(MemoryChunk, hnsw)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memorychunk")
    return time.perf_counter() - started


def hnsw_description(name: str) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT substring(indexdef from 'USING (.*)$'), "
            "pg_size_pretty(pg_relation_size(indexrelid)) "
            "FROM pg_indexes JOIN pg_stat_user_indexes ON indexrelname = indexname "
            "WHERE indexname = %s",
            [name],
        )
        row = cursor.fetchone()
    return f"{row[0]}, {row[1]}" if row else "no HNSW index"

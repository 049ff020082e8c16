"""Memory search at size: one team with N chunks among 10 other teams (N/10 chunks each).

    uv run python benchmarks/memory_search.py                 # SQLite, N=10k
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> \
        uv run python benchmarks/memory_search.py --sizes 10000 100000

PostgreSQL: `vector_candidates` (pgvector HNSW, iterative scan, team filter) p50/p99 and
recall@10 against the exact answer (numpy over the team's vectors), with the exact SQL scan
(index disabled) in the same run as the baseline; p50/p99 and recall@10 also for a small team
(N/10 chunks, 5 % of the rows); plus full-text candidates and the complete hybrid
`memory_search` (which embeds the query with MiniLM first). SQLite: the exact numpy scan and
FTS5, same figures.

Index experiments (PostgreSQL): `--keep` keeps the loaded database for the next run, `--rebuild`
builds the HNSW index again on it (build to build, recall varies: measure each variant twice),
`--m` / `--ef-construction` override the model's index parameters, `--halfvec` builds the same
graph over `embedding::halfvec` and searches through it, `--maintenance-work-mem server` builds
with the server's setting as a migration would, `--vector-only` skips full text and hybrid.

Vectors are synthetic: unit vectors around 300 topic centres with isotropic noise (cosine ~0.5
within a topic). Within a topic that noise spreads over all 384 dimensions, which makes this a
near worst case for an ANN index: benchmarks/memory_vectors.py puts the local intrinsic
dimensionality of these neighbourhoods at ~80 (uniform random vectors: ~110) against ~19 for
real MiniLM embeddings of English paragraphs, and the gap between the 10th and 11th neighbour
at 0.2 % against 0.7 %. Recall measured here is therefore a floor for real embeddings.
Embedding 200k real chunks with MiniLM on 2 cores would take most of an hour and measure the
embedder, not the index. Text is drawn from a Zipf-distributed vocabulary. Data is loaded with
COPY / executemany and the HNSW index is built after loading (as one would for a bulk import).
The benchmark runs in its own database (`<name>_bench` on PostgreSQL, a temporary file on
SQLite) and drops it afterwards (unless `--keep`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as settings.py does, before numpy loads

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")

from memory_search_pg import HALFVEC_SELECT, build_hnsw, hnsw_description, hnsw_index  # noqa: E402

DIM = 384
OTHER_TEAMS = 10
QUERIES = 200
TOPICS = 300
MODEL = "local/all-minilm-l6-v2"
FOCUS_WORDS = (
    "deploy database backup friday token ansible report incident page rota schema index "
    "latency queue worker budget invoice customer release freeze"
)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def synthetic(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    topic = rng.integers(0, len(centres), n)
    return unit(centres[topic] + rng.standard_normal((n, DIM)).astype(np.float32) * 0.055)


def words(n: int, rng: np.random.Generator, vocabulary: list[str]) -> list[str]:
    ranks = np.minimum(rng.zipf(1.3, size=(n, 40)), len(vocabulary)) - 1
    return [" ".join(vocabulary[r] for r in row) for row in ranks]


def percentile(values: list[float], p: float) -> float:
    return float(np.percentile(np.array(values), p))


def setup_database(vendor_pg: bool, keep: bool = False) -> str:
    """Point Django at a throwaway benchmark database and migrate it (`keep`: reuse it)."""
    if vendor_pg:
        url = os.environ["DATABASE_URL"]
        bench_url = url.rsplit("/", 1)[0] + "/" + url.rsplit("/", 1)[1].split("?")[0] + "_bench"
        os.environ["DATABASE_URL"] = bench_url
        import psycopg

        admin = psycopg.connect(url, autocommit=True)
        name = bench_url.rsplit("/", 1)[1]
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not (keep and exists):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}"')
        admin.close()
        return name
    data = tempfile.mkdtemp(prefix="oh-bench-")
    os.environ["OPENHIVE_DATA_DIR"] = data
    return data


def teardown_database(vendor_pg: bool, name: str, original_url: str | None) -> None:
    from django.db import connections

    connections.close_all()
    if vendor_pg and original_url:
        import psycopg

        admin = psycopg.connect(original_url, autocommit=True)
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()


def load(teams, sizes, vectors, texts, vendor_pg: bool) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Insert memories and chunks; returns team id → (chunk ids, vectors)."""
    from django.db import connection
    from django.utils import timezone

    now = timezone.now()
    by_team: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    next_id = 1
    with connection.cursor() as cursor:
        for team, n, vecs, txts in zip(teams, sizes, vectors, texts, strict=True):
            ids = np.arange(next_id, next_id + n, dtype=np.int64)
            next_id += n
            by_team[team.pk] = (ids, vecs)
            memory_rows = [
                (int(i), team.pk, f"k{i}", t, "", "context", True, "", "", now, now)
                for i, t in zip(ids, txts, strict=True)
            ]
            chunk_rows = [
                (
                    int(i),
                    int(i),
                    team.pk,
                    0,
                    t,
                    hashlib.sha256(t.encode()).hexdigest(),
                    v,
                    MODEL,
                    now,
                )
                for i, t, v in zip(ids, txts, vecs, strict=True)
            ]
            memory_cols = (
                "id, team_id, key, content, content_hash, type, active, supersede_reason, "
                "updated_by, created_at, updated_at"
            )
            chunk_cols = (
                'id, memory_id, team_id, "index", content, content_hash, embedding, '
                "embedding_model, created_at"
            )
            if vendor_pg:
                from pgvector.psycopg import register_vector

                register_vector(connection.connection)
                raw = connection.connection.cursor()  # a new cursor sees the vector dumper
                with raw.copy(f"COPY memory_memory ({memory_cols}) FROM STDIN") as copy:
                    for row in memory_rows:
                        copy.write_row(row)
                with raw.copy(f"COPY memory_memorychunk ({chunk_cols}) FROM STDIN") as copy:
                    for row in chunk_rows:
                        copy.write_row(row)
            else:
                cursor.executemany(
                    f"INSERT INTO memory_memory ({memory_cols}) VALUES ({', '.join(['%s'] * 11)})",
                    memory_rows,
                )
                cursor.executemany(
                    f"INSERT INTO memory_memorychunk ({chunk_cols}) "
                    f"VALUES ({', '.join(['%s'] * 9)})",
                    [(*r[:6], r[6].tobytes(), *r[7:]) for r in chunk_rows],
                )
    return by_team


def run_size(n: int, rng: np.random.Generator, vendor_pg: bool, opts: argparse.Namespace) -> None:
    from django.db import connection, transaction

    from memory.models import Memory, MemoryChunk
    from memory.search import memory_search, query_terms, text_candidates, vector_candidates
    from teams.models import Team
    from teams.services import team_ensure_main

    ef_values, keep = opts.ef_search, opts.keep
    hnsw = hnsw_index(opts.m, opts.ef_construction)
    sizes = [n] + [n // OTHER_TEAMS] * OTHER_TEAMS
    # --keep: a database left by an earlier run with these sizes is searched as it is.
    reuse = keep and MemoryChunk.objects.count() == sum(sizes)
    if not reuse:
        MemoryChunk.objects.all().delete()
        Memory.objects.all().delete()
        Team.objects.exclude(name="main").delete()
        main = team_ensure_main()
        Team.objects.create(name="target", parent=main)
        for i in range(OTHER_TEAMS):
            Team.objects.create(name=f"other-{i}", parent=main)
    target = Team.objects.get(name="target")
    teams = [target, *(Team.objects.get(name=f"other-{i}") for i in range(OTHER_TEAMS))]
    centres = unit(rng.standard_normal((TOPICS, DIM)).astype(np.float32))
    vocabulary = [f"w{i}" for i in range(5000)]
    vocabulary[:20] = FOCUS_WORDS.split()
    vectors = [synthetic(s, rng, centres) for s in sizes]
    texts = [words(s, rng, vocabulary) for s in sizes]

    started = time.perf_counter()
    if reuse:
        by_team, next_id = {}, 1
        for team, size, vecs in zip(teams, sizes, vectors, strict=True):
            by_team[team.pk] = (np.arange(next_id, next_id + size, dtype=np.int64), vecs)
            next_id += size
    else:
        if vendor_pg:
            with connection.schema_editor() as editor:
                editor.remove_index(MemoryChunk, hnsw)
        with transaction.atomic():
            by_team = load(teams, sizes, vectors, texts, vendor_pg)
    load_s = time.perf_counter() - started
    index_s = 0.0
    if vendor_pg and (not reuse or opts.rebuild):
        index_s = build_hnsw(hnsw, opts.maintenance_work_mem, opts.halfvec)
    total = sum(sizes)
    built = f", HNSW build {index_s:.1f} s" if index_s else (", HNSW reused" if vendor_pg else "")
    print(
        f"\n== {connection.vendor}: team chunks {n:,}, all teams {total:,} "
        f"(load {load_s:.1f} s{built}; load average {os.getloadavg()[0]:.2f})"
    )
    if vendor_pg:
        print(f"index: {hnsw_description(hnsw.name)}")

    ids, team_vectors = by_team[target.pk]
    picks = rng.integers(0, n, opts.queries)
    queries = unit(
        team_vectors[picks] + rng.standard_normal((opts.queries, DIM)).astype(np.float32) * 0.03
    )

    def timed(fn, count: int | None = None) -> tuple[list[float], list]:
        fn(queries[0])  # warm-up
        times, outputs = [], []
        for q in queries[:count]:
            t0 = time.perf_counter()
            outputs.append(fn(q))
            times.append((time.perf_counter() - t0) * 1000)
        return times, outputs

    exact_top = [set(ids[np.argsort(-(team_vectors @ q))[:10]].tolist()) for q in queries]

    def recall(outputs) -> float:
        hits = [
            len({pk for pk, _ in out} & truth) / 10
            for out, truth in zip(outputs, exact_top[: len(outputs)], strict=True)
        ]
        return statistics.mean(hits)

    from memory import search as search_module

    if opts.halfvec:
        search_module._PG_VECTOR_SELECT = HALFVEC_SELECT
    default_ef = search_module.HNSW_EF_SEARCH
    for ef in sorted({default_ef, *ef_values}) if vendor_pg else [default_ef]:
        search_module.HNSW_EF_SEARCH = ef
        ann_times, ann_out = timed(lambda q: vector_candidates(target, q, MODEL, 10))
        label = f"HNSW ef_search={ef}, iterative scan" if vendor_pg else "exact numpy scan"
        marker = " (default)" if ef == default_ef else ""
        print(
            f"vector top-10 ({label}){marker}: "
            f"p50 {percentile(ann_times, 50):.2f} ms  p99 {percentile(ann_times, 99):.2f} ms  "
            f"recall@10 {recall(ann_out):.3f}"
        )
    search_module.HNSW_EF_SEARCH = default_ef
    if vendor_pg:
        # What memory_search(limit=10) does: 80 vector candidates, exactly re-sorted, top 10.
        pool_times, pool_out = timed(lambda q: vector_candidates(target, q, MODEL, 80)[:10])
        print(
            "vector top-10 of 80 candidates (as memory_search): "
            f"p50 {percentile(pool_times, 50):.2f} ms  p99 {percentile(pool_times, 99):.2f} ms  "
            f"recall@10 {recall(pool_out):.3f}"
        )
    ann_times, ann_out = timed(lambda q: vector_candidates(target, q, MODEL, 10))
    if vendor_pg:
        p50, p99, hit = percentile(ann_times, 50), percentile(ann_times, 99), recall(ann_out)
        met = p50 <= 8 and p99 <= 25 and hit >= 0.98
        print(
            f"goal (issue 19): p50 <= 8 ms, p99 <= 25 ms at recall@10 >= 0.98; "
            f"default: p50 {p50:.2f} ms ({p50 / 8:.2f}x goal), p99 {p99:.2f} ms "
            f"({p99 / 25:.2f}x goal), recall@10 {hit:.3f}: {'met' if met else 'NOT met'}; "
            f"load average {os.getloadavg()[0]:.2f}"
        )

        def exact_sql(q):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL enable_indexscan = off")
                cursor.execute(
                    "SELECT id, 1 - (embedding <=> %s::vector) FROM memory_memorychunk "
                    "WHERE team_id = %s AND embedding_model = %s "
                    "ORDER BY embedding <=> %s::vector LIMIT 10",
                    [str(q.tolist()), target.pk, MODEL, str(q.tolist())],
                )
                return cursor.fetchall()

        # The exact scan takes ~100x longer than the index: time it on the first queries only.
        base_times, base_out = timed(exact_sql, 100)
        print(
            f"baseline exact SQL scan (no index, {len(base_out)} queries): "
            f"p50 {percentile(base_times, 50):.2f} ms  "
            f"p99 {percentile(base_times, 99):.2f} ms  recall@10 {recall(base_out):.3f}  "
            f"→ HNSW is {percentile(base_times, 50) / percentile(ann_times, 50):.0f}x faster at p50"
        )

    if vendor_pg:
        # A small team (5 % of the rows): the team filter rejects most of what the graph walk
        # meets, and the iterative scan has to keep walking to find 10 of the team's chunks.
        small = teams[1]
        small_ids, small_vectors = by_team[small.pk]
        small_rng = np.random.default_rng(opts.seed + 1)  # leaves the main stream as it was
        small_queries = unit(
            small_vectors[small_rng.integers(0, len(small_ids), opts.queries)]
            + small_rng.standard_normal((opts.queries, DIM)).astype(np.float32) * 0.03
        )
        small_times, small_hits = [], []
        for q in small_queries:
            truth = set(small_ids[np.argsort(-(small_vectors @ q))[:10]].tolist())
            t0 = time.perf_counter()
            found = vector_candidates(small, q, MODEL, 10)
            small_times.append((time.perf_counter() - t0) * 1000)
            small_hits.append(len({pk for pk, _ in found} & truth) / 10)
        print(
            f"small team ({len(small_ids):,} of {total:,} rows), ef_search={default_ef}: "
            f"p50 {percentile(small_times, 50):.2f} ms  p99 {percentile(small_times, 99):.2f} ms"
            f"  recall@10 {statistics.mean(small_hits):.3f}"
        )
    if opts.vector_only:
        return
    # Distinctive words, as people search (the commonest words would match most rows).
    text_queries = [" ".join(rng.choice(vocabulary[50:1000], 3)) for _ in range(opts.queries)]
    text_times = []
    for tq in text_queries:
        t0 = time.perf_counter()
        text_candidates(target, query_terms(tq), 40)
        text_times.append((time.perf_counter() - t0) * 1000)
    print(
        f"full-text top-40:                      p50 {percentile(text_times, 50):.2f} ms  "
        f"p99 {percentile(text_times, 99):.2f} ms"
    )

    hybrid_times = []
    for tq in text_queries[:50]:
        t0 = time.perf_counter()
        memory_search(team=target, query=tq, limit=10)
        hybrid_times.append((time.perf_counter() - t0) * 1000)
    print(
        f"memory_search (MiniLM query embedding + both + RRF): p50 "
        f"{percentile(hybrid_times, 50):.2f} ms  p99 {percentile(hybrid_times, 99):.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--ef-search", type=int, nargs="*", default=[40, 100, 200], help="also try these"
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="PostgreSQL: keep the benchmark database afterwards and reuse it when it holds "
        "the same data (skips the minutes of loading and index building)",
    )
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--m", type=int, help="HNSW m for this run's build (default: the model's)")
    parser.add_argument(
        "--ef-construction", type=int, help="HNSW ef_construction for this run's build"
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="with --keep: rebuild the HNSW index of the reused data (another build sample)",
    )
    parser.add_argument(
        "--maintenance-work-mem",
        default="1GB",
        help="for the index build; 'server' keeps the server's setting (64MB by default), as a "
        "migration on a user's database would",
    )
    parser.add_argument(
        "--halfvec",
        action="store_true",
        help="PostgreSQL: build the HNSW index over embedding::halfvec and search through it",
    )
    parser.add_argument(
        "--vector-only", action="store_true", help="skip the full-text and hybrid figures"
    )
    args = parser.parse_args()
    original_url = os.environ.get("DATABASE_URL")
    vendor_pg = bool(original_url and original_url.startswith("postgres"))
    name = setup_database(vendor_pg, args.keep and vendor_pg)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    rng = np.random.default_rng(args.seed)
    try:
        for n in args.sizes:
            run_size(n, rng, vendor_pg, args)
    finally:
        teardown_database(vendor_pg and not args.keep, name, original_url)


if __name__ == "__main__":
    main()

"""Hybrid search: best match first, vector-only recall, full-text-only degraded mode, team
isolation, superseded entries flagged, deleted ones gone, and no mixing of embedding models."""

from __future__ import annotations

import pytest
from django.db import connection

from memory import search as search_module
from memory.models import MemoryChunk
from memory.search import memory_search, rrf_fuse, text_candidates, vector_candidates
from memory.services import memory_delete, memory_reembed, memory_save
from openhive.core.errors import DomainError

pytestmark = pytest.mark.django_db

NOTES = {
    "deploy": "We deploy the web application every Friday afternoon with Ansible.",
    "backups": "PostgreSQL database backups are kept for seven days in cold storage.",
    "cat": "The office cat is called Pixel and likes tuna.",
    "oncall": "The on-call rota changes every Monday morning; page the primary first.",
    "style": "Reports use British spelling and short paragraphs.",
}


@pytest.fixture
def notes(ops):
    return {key: memory_save(team=ops, key=key, content=text).memory for key, text in NOTES.items()}


def keys(result) -> list[str]:
    return [hit.memory.key for hit in result.hits]


def test_the_best_match_ranks_first(ops, notes):
    result = memory_search(team=ops, query="how long do we keep database backups", limit=5)
    assert result.mode == "hybrid"
    assert keys(result)[0] == "backups"
    assert result.hits[0].matched == "both"
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True)


def test_a_vector_only_hit_is_returned(ops, notes):
    # No word of the query occurs in the note: only its meaning matches.
    result = memory_search(team=ops, query="kitten pet", limit=3)
    assert keys(result)[0] == "cat"
    assert result.hits[0].matched == "vector"
    assert text_candidates(ops, ["kitten", "pet"], 10) == []


def test_a_query_that_matches_nothing_returns_nothing(ops, notes):
    assert memory_search(team=ops, query="zxqv wptk", limit=5).hits == []


def test_without_an_embedding_model_search_is_full_text_and_says_so(no_embeddings, ops):
    for key, text in NOTES.items():
        memory_save(team=ops, key=key, content=text)
    assert not MemoryChunk.objects.exclude(embedding_model="").exists()
    result = memory_search(team=ops, query="database backups", limit=5)
    assert result.mode == "full_text_only" and "full-text" in result.note
    assert keys(result) == ["backups"] and result.hits[0].matched == "text"
    assert memory_search(team=ops, query="kitten pet", limit=5).hits == []


def test_full_text_ranks_the_document_matching_more_terms_first(no_embeddings, ops):
    memory_save(team=ops, key="one", content="backups happen nightly")
    memory_save(team=ops, key="two", content="database backups happen nightly to cold storage")
    memory_save(team=ops, key="three", content="the database is large")
    result = memory_search(team=ops, query="database backups storage", limit=5)
    assert keys(result)[0] == "two"
    assert set(keys(result)) == {"one", "two", "three"}


def test_search_never_crosses_teams(ops, research, notes):
    memory_save(team=research, key="secret-plan", content="Research backups are kept forever.")
    ops_keys = keys(memory_search(team=ops, query="backups kept forever", limit=10))
    assert "secret-plan" not in ops_keys
    research_result = memory_search(team=research, query="database backups", limit=10)
    assert keys(research_result) == ["secret-plan"]
    assert all(hit.memory.team_id == research.pk for hit in research_result.hits)


def test_superseded_entries_are_found_and_flagged_deleted_ones_are_not(ops, notes):
    memory_save(
        team=ops,
        key="deploy",
        content="We deploy the web application every Monday with Ansible.",
        supersede_reason="Friday freeze",
    )
    result = memory_search(team=ops, query="deploy web application Ansible", limit=5)
    statuses = {(h.memory.key, h.memory.status) for h in result.hits}
    assert ("deploy", "active") in statuses and ("deploy", "superseded") in statuses
    memory_delete(team=ops, key="deploy")
    assert "deploy" not in keys(memory_search(team=ops, query="deploy Ansible", limit=5))


def test_chunks_of_another_embedding_model_are_not_compared_until_reembedded(ops, notes):
    MemoryChunk.objects.filter(team=ops).update(embedding_model="old/model")
    result = memory_search(team=ops, query="kitten pet", limit=3)
    assert result.hits == []  # vectors of another model are never mixed in
    assert memory_reembed()["embedded"] == len(NOTES)
    assert keys(memory_search(team=ops, query="kitten pet", limit=3))[0] == "cat"
    assert memory_reembed()["embedded"] == 0  # idempotent


def test_query_operators_cannot_reach_the_full_text_engine(ops, notes):
    for query in ['"unbalanced', "a AND (b OR", "NEAR(x y)", "-:*^", "' OR 1=1 --", "🚀"]:
        memory_search(team=ops, query=query, limit=5)  # no syntax error from either engine


@pytest.mark.parametrize("query,limit", [("", 5), ("   ", 5), ("x", 0), ("x", 51)])
def test_bad_queries_are_refused(ops, query, limit):
    with pytest.raises(DomainError):
        memory_search(team=ops, query=query, limit=limit)


def test_the_embedding_model_failing_degrades_to_full_text(ops, notes, monkeypatch):
    from memory import embeddings

    class Broken:
        name = "local/all-minilm-l6-v2"

        def embed(self, texts):
            raise embeddings.EmbeddingError("model down")

    monkeypatch.setattr(search_module.embeddings, "get_embedder", lambda: Broken())
    result = memory_search(team=ops, query="database backups", limit=5)
    assert result.mode == "full_text_only" and "failed" in result.note
    assert keys(result) == ["backups"]


def test_rrf_sums_reciprocal_ranks():
    fused = rrf_fuse([1, 2, 3], [3, 4])
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[1] == pytest.approx(1 / 61)
    assert max(fused, key=fused.get) == 3


def test_vector_candidates_are_nearest_first_and_team_scoped(ops, research, notes):
    memory_save(team=research, key="cat", content=NOTES["cat"])
    query = search_module.embeddings.get_embedder().embed(["cat"])[0]
    ranked = vector_candidates(ops, query, "local/all-minilm-l6-v2", 10)
    assert len(ranked) == len(NOTES)
    sims = [s for _, s in ranked]
    assert sims == sorted(sims, reverse=True)
    team_of = dict(MemoryChunk.objects.values_list("pk", "team_id"))
    assert {team_of[pk] for pk, _ in ranked} == {ops.pk}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pgvector HNSW is PostgreSQL-only")
def test_postgres_vector_search_uses_the_hnsw_index(ops, notes):
    literal = "[" + ",".join(["1"] + ["0"] * 383) + "]"
    with connection.cursor() as cursor:
        # A handful of rows: the planner would rather use the team's btree index and sort.
        # Inside the test's transaction, take those away (rolled back afterwards).
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_memorychunk' "
            "AND indexdef LIKE '%%btree%%team_id%%'"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN " + search_module._PG_VECTOR_SELECT,
            [literal, ops.pk, "local/all-minilm-l6-v2", literal, 10],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "memory_chunk_hnsw" in plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pgvector HNSW is PostgreSQL-only")
@pytest.mark.django_db(transaction=True)
def test_postgres_vector_search_settings_last_for_its_own_query_only(ops, research, notes):
    # The HNSW settings travel with the query in one round trip; outside a transaction they
    # must not stay on the (persistent) connection for whatever it runs next.
    query = search_module.embeddings.get_embedder().embed(["cat"])[0]
    assert vector_candidates(ops, query, "local/all-minilm-l6-v2", 10)
    with connection.cursor() as cursor:
        cursor.execute("SHOW hnsw.ef_search")
        assert int(cursor.fetchone()[0]) != search_module.HNSW_EF_SEARCH
        cursor.execute("SHOW hnsw.iterative_scan")
        assert cursor.fetchone()[0] == "off"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pgvector HNSW is PostgreSQL-only")
def test_postgres_teams_from_a_size_on_are_steered_to_the_hnsw_index(ops, notes, monkeypatch):
    from django.test.utils import CaptureQueriesContext

    query = search_module.embeddings.get_embedder().embed(["cat"])[0]
    model = "local/all-minilm-l6-v2"
    monkeypatch.setattr(search_module, "_team_sizes", {})
    monkeypatch.setattr(search_module, "HNSW_MIN_TEAM_CHUNKS", 1_000_000)
    with CaptureQueriesContext(connection) as small:
        planner_choice = vector_candidates(ops, query, model, 10)
    monkeypatch.setattr(search_module, "HNSW_MIN_TEAM_CHUNKS", 1)
    with CaptureQueriesContext(connection) as large:
        steered = vector_candidates(ops, query, model, 10)
    assert "enable_sort" not in " ".join(q["sql"] for q in small.captured_queries)
    assert "enable_sort = off" in " ".join(q["sql"] for q in large.captured_queries)
    assert [pk for pk, _ in steered] == [pk for pk, _ in planner_choice]
    literal = "[" + ",".join(["1"] + ["0"] * 383) + "]"
    with connection.cursor() as cursor:
        # Even beside the team's btree index, which the planner prefers for a handful of rows.
        cursor.execute(search_module._PG_FORCE_HNSW)
        cursor.execute(
            "EXPLAIN " + search_module._PG_VECTOR_SELECT, [literal, ops.pk, model, literal, 10]
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "memory_chunk_hnsw" in plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="steers PostgreSQL's planner only")
def test_postgres_a_teams_chunk_count_is_counted_again_only_after_a_while(ops, notes, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(search_module, "_monotonic", lambda: clock[0])
    monkeypatch.setattr(search_module, "_team_sizes", {})
    first, everyone = search_module._team_chunk_count(ops.pk)
    assert first == MemoryChunk.objects.filter(team=ops).count()
    assert everyone >= first
    memory_save(team=ops, key="more", content="A second cat, called Byte, prefers salmon.")
    clock[0] += search_module.TEAM_SIZE_TTL_S - 1
    assert search_module._team_chunk_count(ops.pk)[0] == first
    clock[0] += 1
    assert search_module._team_chunk_count(ops.pk)[0] == first + 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="steers PostgreSQL's planner only")
def test_postgres_a_large_team_with_a_small_share_is_left_to_the_planner(ops, notes, monkeypatch):
    from django.test.utils import CaptureQueriesContext

    query = search_module.embeddings.get_embedder().embed(["cat"])[0]
    monkeypatch.setattr(search_module, "HNSW_MIN_TEAM_CHUNKS", 1)
    # 5 chunks of a (pretended) million: an HNSW walk would meet almost none of them.
    monkeypatch.setattr(search_module, "_team_chunk_count", lambda team_id: (5, 1_000_000.0))
    with CaptureQueriesContext(connection) as captured:
        assert vector_candidates(ops, query, "local/all-minilm-l6-v2", 10)
    assert "enable_sort" not in " ".join(q["sql"] for q in captured.captured_queries)


def test_reembed_command_moves_chunks_to_the_current_model(ops, notes, capsys):
    from django.core.management import call_command

    MemoryChunk.objects.filter(team=ops, memory__key="cat").update(embedding_model="old/model")
    call_command("openhive", "reembed", "--team", "ops")
    out = capsys.readouterr().out
    assert "Embedded 1 chunk(s) with local/all-minilm-l6-v2" in out
    assert not MemoryChunk.objects.exclude(embedding_model="local/all-minilm-l6-v2").exists()


def test_reembed_without_a_model_is_a_clear_error(no_embeddings, ops):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no embedding model"):
        call_command("openhive", "reembed")


def test_reembed_command_shows_its_progress_batch_by_batch(ops, notes, capsys):
    from django.core.management import call_command

    MemoryChunk.objects.filter(team=ops).update(embedding_model="old/model")
    total = MemoryChunk.objects.filter(team=ops).count()
    call_command("openhive", "reembed", "--team", "ops", "--batch-size", "1")
    out = capsys.readouterr().out
    assert f"1/{total} chunk(s) embedded" in out
    assert f"{total}/{total} chunk(s) embedded (100%)" in out

"""Memory migrations: the model state matches the migrations, and 0005 (the HNSW index rebuilt
with ef_construction 128) goes forward and back on both databases without losing a chunk."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory.models import MemoryChunk
from memory.search import memory_search
from memory.services import memory_save

BEFORE = ("memory", "0004_historyvector")
AFTER = ("memory", "0005_hnsw_ef_construction")


def hnsw_definition() -> str | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_chunk_hnsw'")
        row = cursor.fetchone()
    return row[0] if row else None


def migrate_to(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([target])


@pytest.mark.django_db
def test_the_models_need_no_new_migration():
    out = StringIO()  # --check exits non-zero when the models changed without a migration
    call_command("makemigrations", "memory", "--check", "--dry-run", stdout=out)


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="pgvector HNSW is PostgreSQL-only")
def test_the_hnsw_index_is_built_as_the_model_declares():
    declared = next(i for i in MemoryChunk._meta.indexes if i.name == "memory_chunk_hnsw")
    definition = hnsw_definition()
    assert definition is not None
    assert "vector_cosine_ops" in definition
    assert f"m='{declared.m}'" in definition
    assert f"ef_construction='{declared.ef_construction}'" in definition
    assert declared.ef_construction == 128


@pytest.mark.django_db(transaction=True)
def test_the_hnsw_rebuild_migrates_back_and_forth_keeping_every_chunk(main_team):
    from tests.factories import TeamFactory

    ops = TeamFactory(name="ops", parent=main_team)
    memory_save(team=ops, key="cat", content="The office cat is called Pixel and likes tuna.")
    chunks = MemoryChunk.objects.count()
    try:
        migrate_to(BEFORE)
        if connection.vendor == "postgresql":
            assert "ef_construction='64'" in (hnsw_definition() or "")
        migrate_to(AFTER)
    finally:
        migrate_to(AFTER)  # whatever happened, leave the schema as the other tests expect it
    if connection.vendor == "postgresql":
        assert "ef_construction='128'" in (hnsw_definition() or "")
    assert MemoryChunk.objects.count() == chunks
    result = memory_search(team=ops, query="what is the cat called", limit=3)
    assert [hit.memory.key for hit in result.hits][:1] == ["cat"]

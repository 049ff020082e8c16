"""The chunk HNSW index over half-precision copies of the embeddings (PostgreSQL only): half
the index pages to read per search (benchmarks/memory_search.py), the same recall@10 at 384
dimensions; search orders by the same cast expression and re-ranks by the float similarity."""

import django.contrib.postgres.indexes
import django.db.models.functions.comparison
import pgvector.django.halfvec
import pgvector.django.indexes
from django.db import migrations

from memory.migration_ops import PostgresOnlyAddIndex, PostgresOnlyRemoveIndex


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0003_chunks_search"),
    ]

    operations = [
        PostgresOnlyRemoveIndex(
            model_name="memorychunk",
            name="memory_chunk_hnsw",
        ),
        PostgresOnlyAddIndex(
            model_name="memorychunk",
            index=pgvector.django.indexes.HnswIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.comparison.Cast(
                        "embedding", output_field=pgvector.django.halfvec.HalfVectorField(dimensions=384)
                    ),
                    name="halfvec_cosine_ops",
                ),
                ef_construction=64,
                m=16,
                name="memory_chunk_hnsw_half",
            ),
        ),
    ]

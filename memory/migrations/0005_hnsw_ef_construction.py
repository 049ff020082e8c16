# Rebuilds the HNSW index with ef_construction 128 (was 64): at 100k chunks of one team among
# 200k, recall@10 at ef_search 200 went from 0.955-0.989 (build to build) to ~1.0, for about
# 1.5-2x the build time (benchmarks/memory_search.py, README "Memory"). Remove and add run in the
# migration's transaction: a failure leaves the old index in place.

import pgvector.django.indexes
from django.db import migrations

from memory.migration_ops import PostgresOnlyAddIndex, PostgresOnlyRemoveIndex


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0004_historyvector'),
    ]

    operations = [
        PostgresOnlyRemoveIndex(
            model_name='memorychunk',
            name='memory_chunk_hnsw',
        ),
        PostgresOnlyAddIndex(
            model_name='memorychunk',
            index=pgvector.django.indexes.HnswIndex(ef_construction=128, fields=['embedding'], m=16, name='memory_chunk_hnsw', opclasses=['vector_cosine_ops']),
        ),
    ]

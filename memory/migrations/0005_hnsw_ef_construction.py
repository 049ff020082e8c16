# Rebuilds the HNSW index with ef_construction 128 (was 64): at 100k chunks of one team among
# 200k, recall@10 at ef_search 200 went from 0.942-0.989 (three builds) to 0.999-1.000 (three),
# for ~1.6x the build time (benchmarks/memory_search.py). At 200k chunks this migration took
# 8 min with PostgreSQL's default maintenance_work_mem (64 MB), 1.5-2 min with 1 GB (README,
# Memory). Remove and add run in the migration's transaction: a failure leaves the old index.

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

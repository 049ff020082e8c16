"""Enable pgvector on PostgreSQL (memory embeddings). A no-op on SQLite."""

from django.db import migrations
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [VectorExtension()]

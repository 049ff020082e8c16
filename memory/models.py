from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import HnswIndex

from .fields import EmbeddingField

EMBEDDING_DIMENSIONS = 384


class Memory(models.Model):
    """Something a team learned and wants across its disposable sessions.

    A key has at most one active entry. Superseding keeps the old row (active=False,
    `superseded_by` → the new row, still searchable); deleting is soft (`deleted_at`, no longer
    searched or injected)."""

    class Type(models.TextChoices):
        IDENTITY = "identity"
        LESSON = "lesson"
        DECISION = "decision"
        CONTEXT = "context"
        REFERENCE = "reference"
        HISTORICAL = "historical"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="memories")
    key = models.CharField(max_length=200)
    content = models.TextField()
    content_hash = models.CharField(max_length=64, blank=True, default="")
    type = models.CharField(max_length=12, choices=Type.choices, default=Type.CONTEXT)
    active = models.BooleanField(default=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    supersede_reason = models.TextField(blank=True, default="")
    updated_by = models.CharField(max_length=100, blank=True, default="")
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team_id", "key", "-created_at"]
        verbose_name_plural = "memories"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "key"],
                condition=models.Q(active=True),
                name="uniq_active_memory_key",
            )
        ]
        indexes = [
            models.Index(
                fields=["team", "type"], condition=models.Q(active=True), name="memory_inject_idx"
            ),
            models.Index(fields=["team", "key", "-created_at"], name="memory_history_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.team.name}:{self.key}"

    @property
    def status(self) -> str:
        if self.deleted_at is not None:
            return "deleted"
        return "active" if self.active else "superseded"


class MemoryChunk(models.Model):
    """A searchable piece of a memory (~500 words with overlap) and its embedding. Only
    searchable memories (active or superseded, not deleted) have chunks. `team` repeats the
    memory's team so every search filters by team before anything else.

    Full text: PostgreSQL keeps `search_vector` (tsvector, GIN) in step by a trigger; SQLite keeps
    the FTS5 table `memory_chunk_fts` in step by triggers (both in migration 0003)."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="chunks")
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    index = models.PositiveIntegerField()
    content = models.TextField()
    content_hash = models.CharField(max_length=64)
    embedding = EmbeddingField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    search_vector = SearchVectorField(null=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["memory_id", "index"]
        indexes = [
            models.Index(fields=["team", "embedding_model"], name="memory_chunk_team_model_idx"),
            # PostgreSQL only (migration 0003 adds them there and nowhere else).
            HnswIndex(
                name="memory_chunk_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            GinIndex(fields=["search_vector"], name="memory_chunk_fts_gin"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id}#{self.index}"

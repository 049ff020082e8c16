from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import HnswIndex

from .fields import EmbeddingField

EMBEDDING_DIMENSIONS = 384
# The HNSW index's name, which `memory.selectors.vector_index_fit` sizes.
VECTOR_INDEX = "memory_chunk_hnsw"


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
            # PostgreSQL only (migrations 0003 and 0005 add them there and nowhere else).
            # ef_construction 128, not pgvector's 64: recall@10 at 100k chunks of a team went
            # from 0.94-0.99 (build to build) to 0.999-1.000, for ~1.6x the build time (README).
            HnswIndex(
                name=VECTOR_INDEX,
                fields=["embedding"],
                m=16,
                ef_construction=128,
                opclasses=["vector_cosine_ops"],
            ),
            GinIndex(fields=["search_vector"], name="memory_chunk_fts_gin"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id}#{self.index}"


class HistoryVector(models.Model):
    """The embedding of one history document (a finished session or a chat topic of a team),
    for the vector half of search_history. Filled lazily by the search itself (the newest
    documents first) and refreshed when the document's text changes (`content_hash`)."""

    class Kind(models.TextChoices):
        SESSION = "session"
        TOPIC = "topic"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=7, choices=Kind.choices)
    object_id = models.PositiveBigIntegerField()
    content_hash = models.CharField(max_length=64)
    embedding = EmbeddingField(dimensions=EMBEDDING_DIMENSIONS)
    embedding_model = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team_id", "kind", "object_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "kind", "object_id", "embedding_model"],
                name="uniq_history_vector",
            )
        ]

    def __str__(self) -> str:
        return f"{self.team_id}:{self.kind}:{self.object_id}"

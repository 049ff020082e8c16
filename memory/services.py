"""State changes of team memory: save (with supersede rules and dedup), soft delete, re-embed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction
from django.utils import timezone

from openhive.core.errors import Conflict, DomainError
from openhive.core.scrubbing import scrub
from teams.models import Team

from . import embeddings
from .chunking import chunk_text, content_hash
from .models import Memory, MemoryChunk

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

MAX_KEY_LENGTH = 200
MAX_CONTENT_CHARS = 100_000

TYPE_ALIASES = {
    "warning": "lesson",
    "insight": "lesson",
    "learning": "lesson",
    "core": "identity",
    "self": "identity",
    "commitment": "decision",
    "choice": "decision",
    "note": "decision",
    "active": "context",
    "background": "context",
    "pointer": "reference",
    "link": "reference",
    "archive": "historical",
    "past": "historical",
}


def memory_type_resolve(raw: str | None) -> str:
    """A type or one of its aliases (trimmed, any case) → the type; empty means context."""
    name = (raw or "").strip().lower()
    if not name:
        return Memory.Type.CONTEXT
    name = TYPE_ALIASES.get(name, name)
    if name not in Memory.Type.values:
        raise DomainError(
            f"Unknown memory type: {raw}. Use one of {', '.join(Memory.Type.values)} "
            f"(aliases: {', '.join(sorted(TYPE_ALIASES))})",
            code="unknown_type",
        )
    return name


@dataclass
class SaveResult:
    memory: Memory
    created: bool  # False: identical content was already the active entry (a no-op)
    superseded: Memory | None = None
    embedded: bool = False


@dataclass
class _PreparedChunk:
    index: int
    content: str
    hash: str
    vector: np.ndarray | None


def _embed_chunks(team: Team, texts: Sequence[str]) -> tuple[list[np.ndarray | None], str]:
    """Vectors for the chunks (reusing the team's stored vectors of identical text), and the
    model name; ([None...], "") when there is no model or it failed (search still finds the
    text; `reembed` fills the gap later)."""
    embedder = embeddings.get_embedder()
    if embedder is None or not texts:
        return [None] * len(texts), ""
    hashes = [content_hash(t) for t in texts]
    known = dict(
        MemoryChunk.objects.filter(
            team=team,
            content_hash__in=set(hashes),
            embedding_model=embedder.name,
            embedding__isnull=False,
        ).values_list("content_hash", "embedding")
    )
    missing = [i for i, h in enumerate(hashes) if h not in known]
    vectors: list[np.ndarray | None] = [known.get(h) for h in hashes]
    if missing:
        try:
            fresh = embedder.embed([texts[i] for i in missing])
        except embeddings.EmbeddingError as exc:
            logger.warning("memory saved without embeddings: %s", exc.message)
            return [None] * len(texts), ""
        for i, vector in zip(missing, fresh, strict=True):
            vectors[i] = vector
    return vectors, embedder.name


def memory_save(
    *,
    team: Team,
    key: str,
    content: str,
    type: str | None = None,
    supersede_reason: str = "",
    updated_by: str = "",
) -> SaveResult:
    """Save an entry. An active entry under the same key is only replaced with a reason (it
    stays, superseded and searchable); identical content is a no-op. Known secrets in the
    content are redacted first: memory is injected into prompts and shown in the admin."""
    key = (key or "").strip()
    if not key or len(key) > MAX_KEY_LENGTH:
        raise DomainError(f"key must be 1 to {MAX_KEY_LENGTH} characters", code="invalid_key")
    content = scrub((content or "").strip())
    if not content:
        raise DomainError("content must not be empty", code="invalid_content")
    if len(content) > MAX_CONTENT_CHARS:
        raise DomainError(
            f"content is longer than {MAX_CONTENT_CHARS} characters; save a summary and keep "
            "the full text in a file",
            code="invalid_content",
        )
    current = Memory.objects.filter(team=team, key=key, active=True).first()
    # No type given: a new version keeps the type of the one it replaces.
    kind = memory_type_resolve(type) if (type or "").strip() or current is None else current.type
    digest = content_hash(content)
    if current is not None and current.content_hash == digest and current.type == kind:
        return SaveResult(memory=current, created=False)
    if current is not None and not supersede_reason.strip():
        raise Conflict(
            f'Active entry exists for key "{key}"; pass supersede_reason to replace it '
            "(the old entry stays searchable, marked superseded)",
            code="supersede_reason_required",
        )
    texts = chunk_text(content)
    # The model runs outside the transaction: a slow embedder must not hold a write lock.
    vectors, model = _embed_chunks(team, texts)
    chunks = [
        _PreparedChunk(i, t, content_hash(t), v)
        for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
    ]
    try:
        return _store(team, key, content, digest, kind, supersede_reason, updated_by, chunks, model)
    except IntegrityError as exc:  # a concurrent save of the same key won the race
        raise Conflict(
            f'key "{key}" was saved concurrently; read it and supersede it with a reason',
            code="supersede_reason_required",
        ) from exc


@transaction.atomic
def _store(
    team: Team,
    key: str,
    content: str,
    digest: str,
    kind: str,
    reason: str,
    updated_by: str,
    chunks: list[_PreparedChunk],
    model: str,
) -> SaveResult:
    current = Memory.objects.select_for_update().filter(team=team, key=key, active=True).first()
    if current is not None and not reason.strip():
        raise Conflict(
            f'Active entry exists for key "{key}"; pass supersede_reason to replace it',
            code="supersede_reason_required",
        )
    if current is not None:
        current.active = False
        current.save(update_fields=["active", "updated_at"])
    memory = Memory.objects.create(
        team=team,
        key=key,
        content=content,
        content_hash=digest,
        type=kind,
        supersede_reason=reason.strip() if current is not None else "",
        updated_by=updated_by,
    )
    if current is not None:
        current.superseded_by = memory
        current.save(update_fields=["superseded_by"])
    MemoryChunk.objects.bulk_create(
        [
            MemoryChunk(
                memory=memory,
                team=team,
                index=c.index,
                content=c.content,
                content_hash=c.hash,
                embedding=c.vector,
                embedding_model=model if c.vector is not None else "",
            )
            for c in chunks
        ]
    )
    return SaveResult(memory=memory, created=True, superseded=current, embedded=bool(model))


@transaction.atomic
def memory_delete(*, team: Team, key: str, deleted_by: str = "") -> bool:
    """Soft delete: every version of the key leaves search and the prompt; rows stay for the
    operator's history. False when the team has no entry under that key."""
    rows = Memory.objects.select_for_update().filter(
        team=team, key=(key or "").strip(), deleted_at__isnull=True
    )
    ids = list(rows.values_list("pk", flat=True))
    if not ids:
        return False
    Memory.objects.filter(pk__in=ids).update(
        active=False, deleted_at=timezone.now(), updated_by=deleted_by, updated_at=timezone.now()
    )
    MemoryChunk.objects.filter(memory_id__in=ids).delete()
    return True


def memory_reembed(
    *,
    batch_size: int = 64,
    team: Team | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Embed every chunk whose vector is missing or from another model with the current model.
    Idempotent and resumable: each batch commits on its own. `progress(done, total)` is called
    after each batch."""
    embedder = embeddings.get_embedder()
    if embedder is None:
        raise DomainError(
            "no embedding model is configured (providers.yaml `embedding:`), nothing to embed",
            code="embedding_unavailable",
        )
    pending = MemoryChunk.objects.exclude(embedding_model=embedder.name)
    if team is not None:
        pending = pending.filter(team=team)
    total = pending.count() if progress is not None else 0
    done = 0
    last_id = 0
    while True:
        rows = list(
            pending.filter(pk__gt=last_id).order_by("pk").values_list("pk", "content")[:batch_size]
        )
        if not rows:
            break
        vectors = embedder.embed([content for _, content in rows])
        with transaction.atomic():
            for (pk, _), vector in zip(rows, vectors, strict=True):
                MemoryChunk.objects.filter(pk=pk).update(
                    embedding=vector, embedding_model=embedder.name
                )
        done += len(rows)
        last_id = rows[-1][0]
        if progress is not None:
            progress(done, max(total, done))
    return {"model": embedder.name, "embedded": done}

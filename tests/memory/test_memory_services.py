"""Saving, superseding, dedup, type aliases and soft delete of team memory."""

from __future__ import annotations

import itertools

import pytest
from cryptography.fernet import Fernet

from memory.chunking import MAX_WORDS, OVERLAP_WORDS, chunk_text
from memory.models import Memory, MemoryChunk
from memory.services import memory_delete, memory_save, memory_type_resolve
from openhive.core.errors import Conflict, DomainError
from vault import crypto
from vault.services import vault_store_secret

pytestmark = pytest.mark.django_db


def test_saving_a_new_key_creates_an_active_entry_with_embedded_chunks(ops):
    saved = memory_save(team=ops, key="deploy", content="Deploy on Fridays.", updated_by="ops")
    assert saved.created and saved.embedded
    memory = saved.memory
    assert memory.active and memory.status == "active" and memory.type == "context"
    chunk = MemoryChunk.objects.get(memory=memory)
    assert chunk.team_id == ops.pk and chunk.embedding_model == "local/all-minilm-l6-v2"
    assert len(chunk.embedding) == 384


def test_an_active_key_cannot_be_overwritten_without_a_reason(ops):
    memory_save(team=ops, key="deploy", content="Deploy on Fridays.")
    with pytest.raises(Conflict, match='Active entry exists for key "deploy"'):
        memory_save(team=ops, key="deploy", content="Deploy on Mondays.")
    assert Memory.objects.filter(team=ops).count() == 1


def test_superseding_keeps_the_old_entry_marked_and_searchable(ops):
    old = memory_save(team=ops, key="deploy", content="Deploy on Fridays.").memory
    new = memory_save(
        team=ops, key="deploy", content="Deploy on Mondays.", supersede_reason="Friday freezes"
    )
    old.refresh_from_db()
    assert new.superseded == old
    assert not old.active and old.status == "superseded" and old.superseded_by == new.memory
    assert new.memory.active and new.memory.supersede_reason == "Friday freezes"
    assert MemoryChunk.objects.filter(memory=old).exists()  # still searchable
    assert Memory.objects.filter(team=ops, key="deploy", active=True).count() == 1


def test_saving_identical_content_again_is_a_no_op(ops):
    first = memory_save(team=ops, key="deploy", content="Deploy on Fridays.")
    again = memory_save(team=ops, key="deploy", content="  Deploy on Fridays.  ")
    assert not again.created and again.memory.pk == first.memory.pk
    assert Memory.objects.filter(team=ops).count() == 1
    assert MemoryChunk.objects.filter(team=ops).count() == 1


@pytest.mark.parametrize(
    ("raw", "resolved"),
    [
        ("insight", "lesson"),
        ("Warning", "lesson"),
        (" learning ", "lesson"),
        ("core", "identity"),
        ("self", "identity"),
        ("commitment", "decision"),
        ("choice", "decision"),
        ("note", "decision"),
        ("active", "context"),
        ("background", "context"),
        ("pointer", "reference"),
        ("link", "reference"),
        ("archive", "historical"),
        ("past", "historical"),
        ("", "context"),
        (None, "context"),
        ("DECISION", "decision"),
    ],
)
def test_type_aliases_resolve(raw, resolved):
    assert memory_type_resolve(raw) == resolved


def test_an_unknown_type_is_refused_and_nothing_is_saved(ops):
    with pytest.raises(DomainError, match="Unknown memory type: gossip"):
        memory_save(team=ops, key="k", content="c", type="gossip")
    assert not Memory.objects.exists()


def test_soft_delete_removes_every_version_from_search_but_keeps_the_rows(ops):
    memory_save(team=ops, key="deploy", content="Deploy on Fridays.")
    memory_save(team=ops, key="deploy", content="Deploy on Mondays.", supersede_reason="freeze")
    assert memory_delete(team=ops, key="deploy", deleted_by="ops") is True
    rows = Memory.objects.filter(team=ops, key="deploy")
    assert rows.count() == 2
    assert all(m.status == "deleted" and not m.active for m in rows)
    assert not MemoryChunk.objects.filter(team=ops).exists()
    assert memory_delete(team=ops, key="deploy") is False
    # The key is free again without a supersede reason.
    assert memory_save(team=ops, key="deploy", content="Deploy daily.").created


def test_delete_only_touches_the_callers_team(ops, research):
    memory_save(team=research, key="deploy", content="Research deploys weekly.")
    assert memory_delete(team=ops, key="deploy") is False
    assert Memory.objects.get(team=research).active


def test_known_secrets_are_redacted_before_memory_stores_them(ops, settings):
    settings.VAULT_KEYS = [Fernet.generate_key().decode()]
    crypto.reset_keys()
    vault_store_secret(team=ops, key="TOKEN", value="tok-abcdef123456", updated_by="main")
    saved = memory_save(team=ops, key="api", content="Call the API with tok-abcdef123456 daily.")
    assert saved.memory.content == "Call the API with [REDACTED] daily."
    assert "tok-abcdef123456" not in MemoryChunk.objects.get(memory=saved.memory).content
    crypto.reset_keys()


def test_empty_key_or_content_is_refused(ops):
    with pytest.raises(DomainError):
        memory_save(team=ops, key=" ", content="x")
    with pytest.raises(DomainError):
        memory_save(team=ops, key="k", content="   ")
    assert not Memory.objects.exists()


def test_long_content_is_chunked_with_overlap():
    paragraphs = [" ".join(f"p{p}w{i}" for i in range(60)) for p in range(30)]  # 1800 words
    chunks = chunk_text("\n\n".join(paragraphs))
    assert len(chunks) >= 4
    for chunk in chunks:
        assert len(chunk.split()) <= MAX_WORDS
    for before, after in itertools.pairwise(chunks):
        tail = before.split()[-OVERLAP_WORDS // 2 :]
        assert " ".join(tail) in after  # the boundary is in both chunks
    words = {w for c in chunks for w in c.split()}
    assert words == {w for p in paragraphs for w in p.split()}


def test_one_huge_paragraph_becomes_overlapping_windows():
    text = " ".join(f"w{i}" for i in range(1200))
    chunks = chunk_text(text)
    assert all(len(c.split()) <= MAX_WORDS for c in chunks)
    assert chunks[0].split()[0] == "w0" and chunks[-1].split()[-1] == "w1199"


def test_short_content_is_one_verbatim_chunk():
    assert chunk_text("  line one\n\nline two  ") == ["line one\n\nline two"]

"""The vector half of search_history: with the offline embedding model, a past session worded
differently from the query is found (BM25 alone misses it), team-scoped, fused with the word
ranking; vectors are stored once and refreshed when a document's text changes."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory import history_vectors
from memory.models import HistoryVector
from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from tests.api.factories import SessionFactory
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db
QUERY = "disk full"


def session(team, asked: str, answer: str):
    return SessionFactory(
        team=team,
        task=TaskFactory(team=team, text=asked, status="done"),
        final_text=answer,
        finished_at=timezone.now(),
    )


def search(team, query: str = QUERY) -> dict:
    found = call_tool(ToolContext(team=team, actor=team.name), "search_history", {"query": query})
    assert found["success"], found
    return found


@pytest.fixture
def past(ops, research):
    return {
        "paraphrase": session(
            ops,
            "The database server ran out of storage space overnight",
            "Removed old WAL segments; 40% of the volume is free again.",
        ),
        "unrelated": session(ops, "Renew the TLS certificates", "Renewed 3 certificates."),
        "worded": session(ops, "Is the disk full on web1?", "No, 20% used."),
        "theirs": session(
            research, "Our storage volume ran out of space", "Cleaned the scratch volume."
        ),
    }


def test_a_paraphrase_words_miss_is_found_by_meaning_and_only_the_teams_own(ops, past):
    found = search(ops)
    assert found["search_mode"] == "hybrid"
    by_id = {r["id"]: r for r in found["results"]}
    assert by_id[past["paraphrase"].pk]["matched"] == "vector"
    assert by_id[past["worded"].pk]["matched"] == "both"
    assert found["results"][0]["id"] == past["worded"].pk  # both halves agree: first
    assert past["theirs"].pk not in by_id
    ranks = [r["id"] for r in found["results"]]
    if past["unrelated"].pk in ranks:
        assert ranks.index(past["paraphrase"].pk) < ranks.index(past["unrelated"].pk)


def test_without_a_model_the_same_search_misses_the_paraphrase(ops, past, no_embeddings):
    found = search(ops)
    assert found["search_mode"] == "full_text_only"
    assert [r["id"] for r in found["results"]] == [past["worded"].pk]


def test_vectors_are_stored_once_and_refreshed_when_the_text_changes(ops, past, monkeypatch):
    search(ops)
    assert HistoryVector.objects.filter(team=ops).count() == 3
    embedded: list[int] = []
    real = history_vectors._refresh

    def counting(team_id, docs, embedder, budget=None):
        class Counting:
            name = embedder.name

            def embed(self, texts):
                embedded.append(len(texts))
                return embedder.embed(texts)

        return real(team_id, docs, Counting(), budget)

    monkeypatch.setattr(history_vectors, "_refresh", counting)
    search(ops)
    assert embedded == []  # only the query was embedded
    past["unrelated"].final_text = "Renewed 3 certificates and rotated the keys."
    past["unrelated"].save()
    search(ops)
    assert embedded == [1]


def test_a_cold_team_embeds_a_bounded_number_per_search(ops, monkeypatch):
    monkeypatch.setattr(history_vectors, "EMBED_PER_SEARCH", 2)
    for i in range(5):
        session(ops, f"Job {i}", f"Done {i}.")
    search(ops, "job")
    assert HistoryVector.objects.filter(team=ops).count() == 2
    search(ops, "job")
    assert HistoryVector.objects.filter(team=ops).count() == 4

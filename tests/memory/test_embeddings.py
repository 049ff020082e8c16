"""The offline embedder reproduces sentence-transformers' all-MiniLM-L6-v2 vectors; the
configured embedding model decides the search mode; litellm models must give 384 dimensions."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from django.test import Client

from memory import embeddings, minilm

REFERENCE = Path(__file__).parent / "fixtures" / "minilm_reference.json"


def test_minilm_vectors_match_the_sentence_transformers_reference():
    reference = json.loads(REFERENCE.read_text())
    got = minilm.load().embed(reference["texts"])
    expected = np.array(reference["vectors"], dtype=np.float32)
    assert got.shape == (5, 384)
    assert np.abs(got - expected).max() < 1e-5
    cosines = (got * expected).sum(axis=1)
    assert cosines.min() > 0.99999


def test_minilm_gives_unit_vectors_independent_of_batch_company():
    model = minilm.load()
    alone = model.embed(["deploy on fridays"])[0]
    batched = model.embed(
        ["a much longer sentence about databases and backups", "deploy on fridays"]
    )
    assert np.linalg.norm(alone) == pytest.approx(1.0, abs=1e-5)
    assert np.abs(batched[1] - alone).max() < 1e-5


def test_related_sentences_are_closer_than_unrelated_ones():
    a, b, c = minilm.load().embed(
        [
            "We release the web app every Friday.",
            "Deployments happen on Fridays.",
            "Cats like tuna.",
        ]
    )
    assert a @ b > a @ c + 0.2


def test_default_mode_is_the_offline_minilm(openhive_dirs):
    assert embeddings.current_model() == minilm.MODEL_NAME
    assert embeddings.search_mode() == "hybrid"
    assert embeddings.get_embedder() is minilm.load()


def test_model_none_disables_embeddings(no_embeddings):
    assert embeddings.get_embedder() is None
    assert embeddings.search_mode() == "full_text_only"


@pytest.mark.django_db
def test_health_reports_the_memory_search_mode(embedding_config):
    assert Client().get("/api/v1/health").json()["memory_search"] == "hybrid"
    embedding_config({"model": "none"})
    assert Client().get("/api/v1/health").json()["memory_search"] == "full_text_only"


class _FakeEmbeddingServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible /embeddings endpoint on loopback."""

    dimensions = 384
    requests: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"body": body, "auth": self.headers.get("Authorization")})
        data = []
        for i, text in enumerate(body["input"]):
            rng = np.random.default_rng(len(text))
            data.append(
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": (rng.standard_normal(self.dimensions) * 3).tolist(),
                }
            )
        payload = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def embedding_server():
    _FakeEmbeddingServer.requests = []
    _FakeEmbeddingServer.dimensions = 384
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeEmbeddingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_litellm_embedding_profile_is_called_with_its_key_and_normalised(
    embedding_config, embedding_server
):
    embedding_config(
        {"model": "openai/text-embedding-3-small", "api_base": embedding_server, "api_key": "k-1"}
    )
    embedder = embeddings.get_embedder()
    assert embedder.name == "openai/text-embedding-3-small"
    vectors = embedder.embed(["one", "three"])
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    request = _FakeEmbeddingServer.requests[-1]
    assert request["body"]["input"] == ["one", "three"]
    assert request["body"]["dimensions"] == 384
    assert request["auth"] == "Bearer k-1"


def test_a_model_with_other_dimensions_is_refused_not_mixed(embedding_config, embedding_server):
    _FakeEmbeddingServer.dimensions = 1536
    embedding_config(
        {"model": "openai/text-embedding-3-large", "api_base": embedding_server, "api_key": "k"}
    )
    with pytest.raises(embeddings.EmbeddingError, match="384 dimensions"):
        embeddings.get_embedder().embed(["x"])

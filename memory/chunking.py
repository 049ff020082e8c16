"""Split memory content into overlapping chunks of about 500 words for full-text and vector
search. Paragraphs are packed greedily; the trailing ≤80 words of a chunk open the next one, so
a sentence on a boundary is findable from both sides."""

from __future__ import annotations

import hashlib
import re

MAX_WORDS = 500
OVERLAP_WORDS = 80
_PARAGRAPH = re.compile(r"\n\s*\n")


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _pieces(text: str) -> list[list[str]]:
    """Paragraphs as word lists; a paragraph longer than MAX_WORDS becomes overlapping windows."""
    pieces: list[list[str]] = []
    for paragraph in _PARAGRAPH.split(text):
        words = paragraph.split()
        if not words:
            continue
        if len(words) <= MAX_WORDS:
            pieces.append(words)
            continue
        step = MAX_WORDS - OVERLAP_WORDS
        for start in range(0, len(words), step):
            pieces.append(words[start : start + MAX_WORDS])
            if start + MAX_WORDS >= len(words):
                break
    return pieces


def chunk_text(text: str) -> list[str]:
    """Chunks in order; text of at most MAX_WORDS words is one chunk, kept verbatim."""
    text = text.strip()
    if not text:
        return []
    if len(text.split()) <= MAX_WORDS:
        return [text]
    chunks: list[str] = []
    current: list[list[str]] = []
    size = 0
    for piece in _pieces(text):
        if current and size + len(piece) > MAX_WORDS:
            chunks.append("\n\n".join(" ".join(p) for p in current))
            carried: list[list[str]] = []
            carried_size = 0
            for previous in reversed(current):
                if carried_size + len(previous) > OVERLAP_WORDS:
                    break
                carried.insert(0, previous)
                carried_size += len(previous)
            if not carried:  # the last paragraph is long: carry its tail
                carried = [current[-1][-OVERLAP_WORDS:]]
                carried_size = len(carried[0])
            if carried_size + len(piece) > MAX_WORDS:
                carried, carried_size = [], 0
            current, size = carried, carried_size
        current.append(piece)
        size += len(piece)
    if current:
        chunks.append("\n\n".join(" ".join(p) for p in current))
    return chunks

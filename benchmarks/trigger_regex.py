"""How long a hostile trigger pattern holds the process: `(a+)+$` against 27 a's and a `!`
(28 characters) and against a 20,000-character message, on RE2 (what triggers use) and, as the
baseline in the same run, on Python's backtracking `re` (what they used before).

    uv run python benchmarks/trigger_regex.py [--skip-baseline]

Goal: under 10 ms per message on RE2 at the input cap. The baseline takes seconds (it holds
the GIL all that time, so every thread of the web process waits with it)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openhive.core import saferegex

PATTERN = "(a+)+$"
SHORT = "a" * 27 + "!"
LONG = (SHORT * 800)[: saferegex.MAX_INPUT_CHARS]
GOAL_MS = 10.0


def timed(func, repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        func()
    return (time.perf_counter() - started) / repeat * 1000


def main() -> None:
    short_ms = timed(lambda: saferegex.search(PATTERN, SHORT, ignore_case=True), 1000)
    long_ms = timed(lambda: saferegex.search(PATTERN, LONG, ignore_case=True), 50)
    print(f"RE2, 28 characters:     {short_ms:9.4f} ms per message")
    print(f"RE2, {len(LONG)} characters: {long_ms:9.4f} ms per message (goal < {GOAL_MS} ms)")
    if "--skip-baseline" not in sys.argv:
        baseline = timed(lambda: re.search(PATTERN, SHORT, re.IGNORECASE), 1)
        print(f"baseline re, 28 characters: {baseline:9.1f} ms (the GIL held throughout)")
        print(f"ratio: {baseline / short_ms:,.0f}x")
    print("PASS" if long_ms < GOAL_MS else "FAIL")


if __name__ == "__main__":
    main()

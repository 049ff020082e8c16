"""Stop requests made in this process (a task cancelled by a tool, by the API in the same
process, or put back by the reaper): a session reads its cancel flag before its next model call
even if it read it a moment ago. Requests from other processes reach it through that read
within CANCEL_FRESH_SECONDS."""

from __future__ import annotations

import itertools

_counter = itertools.count(1)
_generation = 0


def stop_requested() -> None:
    global _generation
    _generation = next(_counter)


def generation() -> int:
    return _generation

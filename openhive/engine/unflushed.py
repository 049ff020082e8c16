"""Spend this process has recorded but not committed yet. A session writes its step (the
exchange with its tokens and cost) once the step's tool calls are done, so while a tool call
runs, the database does not show that step's spend. A session started inside that tool call
(a subagent working for the same task) must still count it against the budgets they share:
the budget guard adds these figures to what it reads from the database."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Unflushed:
    task_id: int | None
    team_id: int
    tokens: int
    usd: Decimal


_lock = threading.Lock()
_pending: dict[int, Unflushed] = {}


def note(session_id: int, spend: Unflushed) -> None:
    with _lock:
        if spend.tokens or spend.usd:
            _pending[session_id] = spend
        else:
            _pending.pop(session_id, None)


def clear(session_id: int) -> None:
    with _lock:
        _pending.pop(session_id, None)


def others(session_id: int) -> list[Unflushed]:
    """The unflushed spend of every other session of this process."""
    with _lock:
        return [spend for sid, spend in _pending.items() if sid != session_id]

"""Where a piece of work came from: while a session runs its tools, the session (and its task)
are the origin of any task they queue or query. The queue stores the origin with the child
task; the child's session records it as its parent and continues its trace."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

from . import tracing


@dataclass(frozen=True)
class Origin:
    session_id: int
    task_id: int | None


_current: contextvars.ContextVar[Origin | None] = contextvars.ContextVar(
    "openhive_origin", default=None
)


@contextlib.contextmanager
def running(origin: Origin) -> Iterator[None]:
    token = _current.set(origin)
    try:
        yield
    finally:
        _current.reset(token)


def current_origin() -> dict:
    """What a child task should remember about its parent: `{}` outside any session."""
    origin = _current.get()
    found: dict = {}
    if origin is not None:
        found["parent_session_id"] = origin.session_id
        if origin.task_id is not None:
            found["parent_task_id"] = origin.task_id
    carrier = tracing.inject()
    if carrier:
        found["trace"] = carrier
    return found

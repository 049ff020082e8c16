"""Ids that every log line of a piece of work carries (team, task, session), and the log
formats: plain text with the ids appended, or one JSON object a line
(`OPENHIVE_LOG_FORMAT=json`). The ids live in a context variable, so threads that copy the
context (the model-call thread, a query's pool thread) keep them."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

_ids: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "openhive_log_ids", default=None
)
FIELDS = ("team", "task_id", "session_id", "trace_id")


@contextlib.contextmanager
def bind(**ids: Any) -> Iterator[None]:
    """Add ids to every log line written inside the block (None values are left out)."""
    given = {k: v for k, v in ids.items() if v not in (None, "")}
    token = _ids.set({**(_ids.get() or {}), **given})
    try:
        yield
    finally:
        _ids.reset(token)


def current() -> dict[str, Any]:
    return dict(_ids.get() or {})


class ContextFilter(logging.Filter):
    """Puts the bound ids on the record (`record.openhive`) and a short suffix for plain text."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _ids.get() or {}
        record.openhive = dict(ids)
        present = [f"{k}={ids[k]}" for k in FIELDS if k in ids]
        record.ids = f" [{' '.join(present)}]" if present else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the bound ids, the exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "openhive", None) or _ids.get() or {})
        if record.exc_text:  # already scrubbed by the scrub filter
            entry["exception"] = record.exc_text
        elif record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)

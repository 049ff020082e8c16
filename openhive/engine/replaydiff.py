"""How a replay compares what it would send now with what was recorded: values that differ
from run to run without meaning anything (ids, timestamps, durations) are normalised, and a
difference is shown as a short unified diff."""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from typing import Any

DIFF_LINES = 24

_VOLATILE_KEY = re.compile(r"(^|_)(id|ids|at)$|_ms$")
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?( UTC)?"
)


def normalise(value: Any) -> Any:
    """Ids, timestamps and durations differ from run to run without meaning anything."""
    if isinstance(value, dict):
        return {
            k: "<volatile>" if _VOLATILE_KEY.search(str(k)) else normalise(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        return _TIMESTAMP.sub("<time>", value)
    return value


def message_view(message: dict) -> dict:
    view = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls", "name")}
    content = view.get("content")
    if message.get("role") == "tool" and isinstance(content, str):
        with contextlib.suppress(ValueError):
            view["content"] = json.loads(content)
    return normalise(view)


def _lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines()
    return json.dumps(value, indent=1, sort_keys=True, default=str).splitlines()


def short_diff(recorded: Any, now: Any) -> str:
    lines = list(
        difflib.unified_diff(_lines(recorded), _lines(now), "recorded", "now", n=1, lineterm="")
    )
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... ({len(lines) - DIFF_LINES} more diff lines)"]
    return "\n".join(lines)


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)

"""Whether a trigger run's result goes to the chat that owns the trigger, and with what text.
The run decides, through a small explicit contract in its final answer:

- a fenced block  ```json:notify {"notify": true|false} ```  says yes or no outright;
- the no-op contract  {"action": "noop", "reason": "..."}  (a window tick with nothing to
  report) notifies nobody;
- otherwise the type's default: message and keyword runs answer the chat that fired them,
  schedule and window runs stay silent unless they ask.
"""

from __future__ import annotations

import json
import re

NOTIFY_BLOCK = re.compile(r"```json:notify\s*(\{.*?\})\s*```", re.DOTALL)
NOOP = re.compile(r"\{[^{}]*\"action\"\s*:\s*\"noop\"[^{}]*\}", re.DOTALL)
NOTIFY_BY_DEFAULT = frozenset({"message", "keyword"})
# Appended to every trigger run's task text: the model cannot follow a contract it never saw.
NOTIFY_INSTRUCTION = """## Notification decision
This run was started by a trigger, not by a person waiting for an answer. End your final
answer with a block saying whether the person who set up this trigger should be told:

```json:notify
{"notify": true, "reason": "one disk is over 80 %"}
```

Use `"notify": true` when the result needs their attention (a threshold crossed, a failure,
something they asked to hear about) and keep the text above the block short: it is sent to
them as it is. Use `"notify": false` when there is nothing worth telling. The block itself is
removed before anyone sees the answer."""


def trigger_notification(*, trigger_type: str, status: str, result: str) -> str | None:
    """The text to send, or None to stay silent. Failures are the breaker's business: a
    failed run only answers where a success would have."""
    text = result or ""
    block = NOTIFY_BLOCK.search(text)
    if block is not None:
        text = (text[: block.start()] + text[block.end() :]).strip()
        try:
            wanted = json.loads(block.group(1)).get("notify")
        except (ValueError, AttributeError):
            wanted = None
        if isinstance(wanted, bool):
            return text if wanted and text else None
    if status == "done" and _is_noop(text):
        return None
    if trigger_type not in NOTIFY_BY_DEFAULT or not text.strip():
        return None
    return text


def _is_noop(text: str) -> bool:
    for candidate in NOOP.findall(text):
        try:
            if json.loads(candidate).get("action") == "noop":
                return True
        except ValueError:
            continue
    return False

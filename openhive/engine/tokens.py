"""Counting a session's request in tokens, with litellm's tokenizer and counting rule, one
message at a time; and a cheap bound that is never below the count (budgets use it far from
their limits)."""

from __future__ import annotations

import json

from . import llm
from .recorder import digest


class TokenCounter:
    """Counts a request with litellm's tokenizer and counting rule, one message at a time with
    the counts kept: a session's history only grows between compactions, so each step counts
    only its new messages."""

    def __init__(self, profile, schemas: list[dict], tools_digest: str = "") -> None:
        self.profile = profile
        self.tools_digest = tools_digest
        # By message object: the loop appends and never edits a message (compaction makes new
        # ones). The message is kept with its count, so its id cannot be reused meanwhile.
        self.cache: dict[int, tuple[dict, int]] = {}
        self.bytes_cache: dict[int, tuple[dict, int]] = {}
        self.tools_tokens: int | None = None
        self.tools_bytes: int | None = None
        self.schemas = schemas

    def offer(self, schemas: list[dict], tools_digest: str) -> None:
        self.schemas, self.tools_digest = schemas, tools_digest
        self.tools_tokens = self.tools_bytes = None

    def count(self, messages: list[dict], *, tools: list[dict] | None = None) -> int:
        total = 3  # the reply's priming, as litellm counts it
        for message in messages:
            known = self.cache.get(id(message))
            if known is None or known[0] is not message:
                known = (message, llm.count_message_tokens(self.profile, message))
                self.cache[id(message)] = known
            total += known[1]
        if tools:
            if self.tools_tokens is None:
                self.tools_tokens = _tools_tokens(self.profile, tools, self.tools_digest)
            total += self.tools_tokens
        return total

    def bound(self, messages: list[dict], *, tools: list[dict] | None = None) -> int:
        """Never below `count`: byte-level tokenizers make at least one byte of every token,
        and the per-message overheads are added as `count` adds them."""
        total = 3
        for message in messages:
            known = self.bytes_cache.get(id(message))
            if known is None or known[0] is not message:
                known = (message, _message_bytes(message))
                self.bytes_cache[id(message)] = known
            total += known[1]
        if tools:
            if self.tools_bytes is None:
                self.tools_bytes = len(json.dumps(tools).encode())
            total += max(self.tools_bytes, self.tools_tokens or 0)
        return total


def _message_bytes(message: dict) -> int:
    total = 4  # the 3 a message costs, and 1 more for a `name`
    for key, value in message.items():
        if key == "tool_calls":
            for call in value or []:
                function = call.get("function") or {}
                total += sum(len(str(t).encode()) for t in function.values() if t)
        elif isinstance(value, str):
            total += len(value.encode())
        elif isinstance(value, list):
            total += sum(
                len(part["text"].encode())
                for part in value
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
    return total


_TOOLS_TOKENS: dict[tuple[str, str], int] = {}


def _tools_tokens(profile, tools: list[dict], tools_digest: str) -> int:
    """What offering `tools` adds to a request, counted once per model and set of schemas."""
    key = (profile.model, tools_digest or digest(tools))
    if key not in _TOOLS_TOKENS:
        probe = [{"role": "user", "content": ""}]
        with_tools = llm.count_tokens(profile, probe, tools)
        _TOOLS_TOKENS[key] = max(0, with_tools - llm.count_tokens(profile, probe, []))
    return _TOOLS_TOKENS[key]

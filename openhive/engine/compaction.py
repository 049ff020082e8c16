"""Context-window management. Before each model call the loop counts the request (litellm's
token counter); past a threshold of the profile's `context_window`, older turns are compacted:
first big tool results are cut to a cap with a note, then, if that is not enough, the older
turns are replaced by a summary that a (recorded) model call writes. The system prompt and the
latest turns always stay verbatim. Everything here is a pure function of the messages, so a
session compacts at the same step with the same result every time it is replayed."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from .providers import ProviderProfile

SUMMARY_MARKER = "[Summary of the earlier conversation, written to fit the context window]"
SUMMARY_INSTRUCTION = (
    "Summarise the conversation below for the agent that is having it, so it can go on "
    "without it: the task it was given, what it did (tools called and what they returned), "
    "what it learned, and what is still to do. Keep names, ids, numbers and paths exactly. "
    "Answer with the summary only."
)
SUMMARY_SYSTEM = "You write faithful, compact summaries of agent work sessions."


def context_window(profile: ProviderProfile) -> int | None:
    """The profile's `context_window`, else what litellm knows of the model, else None."""
    if profile.context_window:
        return profile.context_window
    if profile.is_scripted:
        return None
    from .llm import get_litellm

    try:
        info = get_litellm().get_model_info(profile.model)
    except Exception:  # a model litellm does not know: no compaction without a stated window
        return None
    return info.get("max_input_tokens") or info.get("max_tokens") or None


def threshold(profile: ProviderProfile) -> int | None:
    window = context_window(profile)
    if not window:
        return None
    return int(window * settings.OPENHIVE["COMPACT_THRESHOLD"])


def tail_start(messages: list[dict], keep: int) -> int:
    """Where the verbatim tail starts: the last `keep` messages, moved back so a tool result is
    never separated from the assistant message that called it, and never into the system
    prompt."""
    first_body = next(
        (i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages)
    )
    start = max(first_body, len(messages) - keep)
    while start > first_body and messages[start].get("role") == "tool":
        start -= 1
    return start


def cut_tool_results(messages: list[dict], upto: int, cap: int) -> tuple[list[dict], int, int]:
    """Tool results before `upto` longer than `cap` characters, cut to it with a note.
    Returns the messages, the index of the first one changed, and how many were cut."""
    out, first, cut = list(messages), len(messages), 0
    for index in range(upto):
        message = messages[index]
        content = message.get("content")
        if message.get("role") != "tool" or not isinstance(content, str) or len(content) <= cap:
            continue
        note = (
            f"\n[cut: {len(content) - cap:,} more characters removed to fit the context "
            "window; the whole result is in the tool-call audit]"
        )
        out[index] = {**message, "content": content[:cap] + note}
        first, cut = min(first, index), cut + 1
    return out, first, cut


def transcript(messages: list[dict]) -> str:
    """The older turns as plain text for the summariser."""
    lines = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                lines.append(
                    f"assistant called {function.get('name')}({function.get('arguments') or ''})"
                )
            if content:
                lines.append(f"assistant: {content}")
        elif role == "tool":
            lines.append(f"tool {message.get('name') or ''} returned: {content}")
        else:
            lines.append(f"{role}: {content}")
    return "\n".join(lines)


def summary_request(older: list[dict]) -> list[dict]:
    return [
        {"role": "system", "content": SUMMARY_SYSTEM},
        {"role": "user", "content": f"{SUMMARY_INSTRUCTION}\n\n---\n{transcript(older)}"},
    ]


@dataclass
class Compacted:
    messages: list[dict]
    first_changed: int  # messages before this index are unchanged
    cut: int = 0
    summarised: int = 0


def compact(
    messages: list[dict],
    *,
    limit: int,
    count: Callable[[list[dict]], int],
    summarise: Callable[[list[dict]], str],
    bound: Callable[[list[dict]], int] | None = None,
) -> Compacted | None:
    """None if the request fits under `limit` tokens; else the compacted messages. `bound`,
    never below `count`, settles a request far under the limit without tokenising it (a
    worker whose sessions stay short then never loads a tokenizer: ~16-26 MB)."""
    if bound is not None and bound(messages) <= limit:
        return None
    if count(messages) <= limit:
        return None
    conf = settings.OPENHIVE
    start = tail_start(messages, conf["COMPACT_KEEP_MESSAGES"])
    messages, first, cut = cut_tool_results(messages, start, conf["COMPACT_TOOL_RESULT_CHARS"])
    if count(messages) <= limit:
        return Compacted(messages, first, cut=cut)
    body = next((i for i, m in enumerate(messages) if m.get("role") != "system"), start)
    older = messages[body:start]
    if not older:  # only the system prompt and the latest turns: nothing left to compact
        return Compacted(messages, first, cut=cut) if cut else None
    summary = summarise(older)
    note = {"role": "user", "content": f"{SUMMARY_MARKER}\n{summary}"}
    compacted = [*messages[:body], note, *messages[start:]]
    return Compacted(compacted, min(first, body), cut=cut, summarised=len(older))


def digest_of_tools(schemas: list[dict]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(schemas, sort_keys=True).encode()).hexdigest()

"""A recorded session as a conversation an operator can read: who said what, which tools were
called with which arguments, and what they returned. Exchanges store only the messages new
since the previous step; this rebuilds the running history and shows each message once.
Everything is scrubbed again (a secret learned since the recording is hidden too)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from openhive.core.scrubbing import Scrubber, get_scrubber

from .models import LlmExchange, Session, ToolCall

Kind = LlmExchange.Kind

# A tool result or argument list longer than this is cut on the page (the API has it whole).
SHOWN_CHARS = 20_000


@dataclass
class ToolUse:
    id: str
    name: str
    arguments: str
    result: str = ""
    success: bool | None = None
    duration_ms: int | None = None


@dataclass
class Entry:
    """One message of the conversation, or a note about the session (compaction, failure)."""

    role: str  # system | user | assistant | tool | note
    text: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_name: str = ""
    success: bool | None = None
    exchange: LlmExchange | None = None


def _pretty(value: Any, scrubber: Scrubber) -> str:
    """JSON (or a JSON string) indented for reading; any other text as it is."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return _cut(scrubber.text(value))
        if isinstance(value, str):
            return _cut(scrubber.text(value))
    return _cut(json.dumps(scrubber.data(value), indent=2, ensure_ascii=False, default=str))


def _cut(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}\n… ({len(text) - SHOWN_CHARS} more characters)"


def _text(content: Any, scrubber: Scrubber) -> str:
    """Message content as text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return scrubber.text("\n".join(p for p in parts if p))
    return scrubber.text(str(content))


def _success(result_text: str) -> bool | None:
    try:
        parsed = json.loads(result_text)
    except ValueError:
        return None
    return parsed.get("success") if isinstance(parsed, dict) else None


def _tool_uses(message: dict, scrubber: Scrubber) -> list[ToolUse]:
    uses = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        uses.append(
            ToolUse(
                id=str(call.get("id") or ""),
                name=str(function.get("name") or call.get("name") or "?"),
                arguments=_pretty(
                    function.get("arguments") or call.get("arguments") or {}, scrubber
                ),
            )
        )
    return uses


def _entry(message: dict, scrubber: Scrubber, by_id: dict[str, ToolUse]) -> Entry:
    role = str(message.get("role") or "?")
    text = _text(message.get("content"), scrubber)
    if role == "tool":
        use = by_id.get(str(message.get("tool_call_id") or ""))
        pretty = _pretty(message.get("content") or "", scrubber)
        if use is not None:
            use.result = pretty
        return Entry(
            role="tool",
            text=pretty,
            tool_name=use.name if use else str(message.get("name") or "tool"),
            success=_success(text),
        )
    entry = Entry(role=role, text=text, tool_uses=_tool_uses(message, scrubber))
    for use in entry.tool_uses:
        by_id[use.id] = use
    return entry


def session_transcript(session: Session) -> list[Entry]:
    """The session's conversation in order. Each step's reply is followed by the tool results
    of the next request; the reply itself is not repeated when the next request carries it."""
    scrubber = get_scrubber()
    entries: list[Entry] = []
    by_id: dict[str, ToolUse] = {}
    history: list[dict] = []
    shown = 0  # how much of `history` is already on the page
    for exchange in session.exchanges.order_by("turn"):
        if exchange.kind == Kind.COMPACTION:
            entries.append(
                Entry(
                    role="note",
                    text=f"The history was summarised to fit the context window "
                    f"({len(exchange.request_messages)} messages in).",
                    exchange=exchange,
                )
            )
            continue
        start = len(history) if exchange.request_start is None else exchange.request_start
        request = history[:start] + list(exchange.request_messages)
        # History rewritten before this step (compaction): show it again from there.
        begin = shown if start >= len(history) else start
        for message in request[begin:]:
            if isinstance(message, dict):
                entries.append(_entry(message, scrubber, by_id))
        if exchange.kind == Kind.FAILED:
            error = (exchange.response or {}).get("error") or "the provider did not answer"
            entries.append(
                Entry(
                    role="note",
                    text=f"Model call failed: {scrubber.text(str(error))}",
                    exchange=exchange,
                )
            )
            history, shown = request, len(request)
            continue
        reply = _entry(dict(exchange.response or {}, role="assistant"), scrubber, by_id)
        reply.exchange = exchange
        entries.append(reply)
        history = request
        # The next request carries this reply as its next message: already shown.
        shown = len(request) + 1
    _attach_audit(session, by_id)
    return _join_system(entries)


def _join_system(entries: list[Entry]) -> list[Entry]:
    """The system prompt is sent in parts (a cached static part, a dynamic one): one entry."""
    joined: list[Entry] = []
    for entry in entries:
        if entry.role == "system" and joined and joined[-1].role == "system":
            joined[-1].text += "\n\n" + entry.text
        else:
            joined.append(entry)
    return joined


def _attach_audit(session: Session, by_id: dict[str, ToolUse]) -> None:
    """The audit row of each call gives its outcome and duration (matched in call order)."""
    audit = list(ToolCall.objects.filter(session=session).order_by("created_at", "id"))
    for use in by_id.values():
        for i, row in enumerate(audit):
            if row.tool == use.name:
                use.success, use.duration_ms = row.success, row.duration_ms
                del audit[i]
                break

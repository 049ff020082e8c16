"""A model provider on loopback for tests: it speaks the OpenAI chat-completions and Anthropic
messages protocols (tool calls, usage, streaming as server-sent events, and errors: 429 with
Retry-After, 500, a hang), answering from a queue of scripted turns. The shapes follow the
providers' recorded responses, so litellm's own `openai/` and `anthropic/` clients, streaming
and tool-call parsing run exactly as against the real services."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Turn:
    """One answer: text and/or a tool call, or an HTTP error, or a hang."""

    text: str = ""
    tool: str = ""
    arguments: dict = field(default_factory=dict)
    status: int = 200
    retry_after: float | None = None
    hang: float = 0.0
    prompt_tokens: int = 11
    completion_tokens: int = 7


class FakeLLM:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.default: Turn | None = None
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.ids = itertools.count(1)
        handler = _handler(self)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def script(self, *turns: Turn, default: Turn | None = None) -> None:
        with self.lock:
            self.turns = list(turns)
            self.default = default

    def next_turn(self, body: dict, protocol: str) -> Turn:
        with self.lock:
            self.requests.append({"protocol": protocol, **body})
            if self.turns:
                return self.turns.pop(0)
            return self.default or Turn(text="(no more scripted turns)")


def _handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.endswith("/chat/completions"):
                protocol = "openai"
            elif self.path.endswith("/messages"):
                protocol = "anthropic"
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            turn = fake.next_turn(body, protocol)
            if turn.hang:
                fake.stopping.wait(turn.hang)
                return
            if turn.status != 200:
                self._error(turn, protocol)
                return
            number = next(fake.ids)
            if body.get("stream"):
                self._stream(turn, protocol, number, body)
            elif protocol == "openai":
                self._json(200, openai_response(turn, number, body.get("model", "")))
            else:
                self._json(200, anthropic_response(turn, number, body.get("model", "")))

        def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, turn: Turn, protocol: str) -> None:
            kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(turn.status, "api_error")
            if protocol == "openai":
                payload = {"error": {"message": f"fake {turn.status}", "type": kind, "code": None}}
            else:
                payload = {
                    "type": "error",
                    "error": {"type": kind, "message": f"fake {turn.status}"},
                }
            headers = {}
            if turn.retry_after is not None:
                headers["retry-after"] = f"{turn.retry_after:g}"
            self._json(turn.status, payload, headers)

        def _stream(self, turn: Turn, protocol: str, number: int, body: dict) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            events = (
                openai_events(turn, number, body)
                if protocol == "openai"
                else anthropic_events(turn, number, body.get("model", ""))
            )
            for event in events:
                self.wfile.write(event.encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler


# --- OpenAI chat completions --------------------------------------------------------------------


def _openai_tool_calls(turn: Turn, number: int) -> list[dict]:
    if not turn.tool:
        return []
    return [
        {
            "id": f"call_{number}",
            "type": "function",
            "function": {"name": turn.tool, "arguments": json.dumps(turn.arguments)},
        }
    ]


def openai_response(turn: Turn, number: int, model: str) -> dict:
    calls = _openai_tool_calls(turn, number)
    message: dict = {"role": "assistant", "content": turn.text or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
            "total_tokens": turn.prompt_tokens + turn.completion_tokens,
        },
    }


def _sse(payload: dict, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n"


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def openai_events(turn: Turn, number: int, body: dict) -> list[str]:
    base = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict, finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**base, "choices": [choice]})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(turn.text)]
    for call in _openai_tool_calls(turn, number):
        start = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
        events.append(chunk({"tool_calls": [{"index": 0, **start}]}))
        for piece in _pieces(call["function"]["arguments"]):
            events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    events.append(chunk({}, "tool_calls" if turn.tool else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
            "total_tokens": turn.prompt_tokens + turn.completion_tokens,
        }
        events.append(_sse({**base, "choices": [], "usage": usage}))
    events.append("data: [DONE]\n\n")
    return events


# --- Anthropic messages -------------------------------------------------------------------------


def anthropic_response(turn: Turn, number: int, model: str) -> dict:
    content: list[dict] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    if turn.tool:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{number}",
                "name": turn.tool,
                "input": turn.arguments,
            }
        )
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if turn.tool else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": turn.prompt_tokens,
            "output_tokens": turn.completion_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_events(turn: Turn, number: int, model: str) -> list[str]:
    start = {
        "type": "message_start",
        "message": {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": turn.prompt_tokens, "output_tokens": 1},
        },
    }
    events = [_sse(start, "message_start")]
    index = 0
    if turn.text:
        block = {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        }
        events.append(_sse(block, "content_block_start"))
        for piece in _pieces(turn.text):
            delta = {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            }
            events.append(_sse(delta, "content_block_delta"))
        events.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
        index = 1
    if turn.tool:
        block = {
            "type": "content_block_start",
            "index": index,
            "content_block": {
                "type": "tool_use",
                "id": f"toolu_{number}",
                "name": turn.tool,
                "input": {},
            },
        }
        events.append(_sse(block, "content_block_start"))
        for piece in _pieces(json.dumps(turn.arguments)):
            delta = {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
            events.append(_sse(delta, "content_block_delta"))
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use" if turn.tool else "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": turn.completion_tokens},
    }
    events.append(_sse(end, "message_delta"))
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events

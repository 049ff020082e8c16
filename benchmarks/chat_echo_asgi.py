"""The benchmark's ASGI application: OpenHive's, plus a bare Channels echo socket at /ws/echo/
that answers each message with an `ack` and a `response` at once (no database, no turn). It
is the same-run floor of benchmarks/chat_sockets.py: what the web server and Channels cost alone
on this machine at this moment."""

from __future__ import annotations

import collections
import gc
import json
import os
import time
from pathlib import Path
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer

from openhive.asgi import application as openhive_application
from openhive.chat.dispatch import DirectDispatch


# Dispatched as the chat socket is, so the echo is the floor of what the chat socket runs on,
# not a slower path beside it.
class Echo(DirectDispatch, AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.accept()
        await self.send(json.dumps({"type": "topic_list", "topics": []}))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        await self.send(json.dumps({"type": "ack", "message_id": 0}))
        await self.send(json.dumps({"type": "response", "content": "echo"}))


echo = Echo.as_asgi()


async def application(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] == "websocket" and scope.get("path", "").startswith("/ws/echo"):
        return await echo(scope, receive, send)
    return await openhive_application(scope, receive, send)


class Collections:
    """BENCH_GC_LOG=<file>: this process's garbage collections, each as [wall-clock start,
    generation, pause in ms] (the last 20,000), rewritten after each full collection and at
    most twice a second otherwise, for the benchmark to sum over a window of its own."""

    def __init__(self, path: Path) -> None:
        self.path, self.started, self.at, self.written = path, 0.0, 0.0, 0.0
        self.seen: collections.deque[list] = collections.deque(maxlen=20_000)

    def __call__(self, phase: str, info: dict) -> None:
        now = time.perf_counter()
        if phase == "start":
            self.started, self.at = now, time.time()
            return
        self.seen.append([self.at, info["generation"], (now - self.started) * 1000])
        if info["generation"] == 2 or now - self.written >= 0.5:
            self.written = now
            self.path.write_text(json.dumps(list(self.seen)))


if os.environ.get("BENCH_GC_LOG"):
    gc.callbacks.append(Collections(Path(os.environ["BENCH_GC_LOG"])))

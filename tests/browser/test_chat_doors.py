"""The socket's doors against the real `serve` (uvicorn): a page of a foreign origin reads why
it was refused, /ws/chat without the slash works, an unknown path is told where the chat is,
and none of it leaves a traceback in the log."""

from __future__ import annotations

import json

import pytest
from websockets.sync.client import connect

pytestmark = pytest.mark.e2e

OPEN_SOCKET = """async (url) => await new Promise((resolve) => {
  const socket = new WebSocket(url);
  const seen = { frames: [] };
  socket.onmessage = (event) => seen.frames.push(JSON.parse(event.data));
  socket.onclose = (event) => resolve({ ...seen, code: event.code, reason: event.reason });
})"""


def test_socket_doors_answer_readably_and_log_no_traceback(page, serve):
    # A page of the same server under another name is another origin (http://localhost:port):
    # the browser's script reads the refusal, its reason and its code.
    port = serve.base_url.rsplit(":", 1)[1]
    page.goto(f"http://localhost:{port}/api/v1/health")
    refused = page.evaluate(OPEN_SOCKET, serve.ws_url)
    assert refused["code"] == 4403 and refused["reason"] == "origin_not_allowed"
    [error] = refused["frames"]
    assert error["code"] == "origin_not_allowed" and "CSRF_TRUSTED_ORIGINS" in error["message"]

    base = serve.ws_url.removesuffix("/ws/chat/")
    with connect(f"{base}/ws/chat?token={serve.token}", origin=serve.origin) as ws:
        assert json.loads(ws.recv(timeout=30))["type"] == "topic_list"

    # An unknown path, from the server's own origin: the browser reads where the chat is.
    page.goto(f"{serve.base_url}/api/v1/health")
    unknown = page.evaluate(OPEN_SOCKET, f"{base}/ws/elsewhere/")
    assert (unknown["code"], unknown["reason"]) == (4404, "not_found")
    [error] = unknown["frames"]
    assert error["code"] == "not_found" and "/ws/chat/" in error["message"]

    log = serve.log()
    assert "Traceback" not in log and "No route found" not in log

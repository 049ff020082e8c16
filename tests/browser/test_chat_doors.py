"""The socket's doors against the real `serve` (daphne): a page of a foreign origin reads why
it was refused, /ws/chat without the slash works, an unknown path is told where the chat is,
and none of it leaves a traceback in the log."""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import ConnectionClosed
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

    error, closed = _unknown_path_answer(f"{base}/ws/elsewhere/", serve.origin)
    assert error["code"] == "not_found" and "/ws/chat/" in error["message"]
    assert closed == (4404, "not_found")

    log = serve.log()
    assert "Traceback" not in log and "No route found" not in log


def _unknown_path_answer(url: str, origin: str) -> tuple[dict, tuple]:
    """The error frame and the close of a socket opened on `url`. The server sends the frame,
    then closes; when its TCP close overtakes the client's close reply, this client library
    drops the frames it had read with that reply (websockets' `recv_events`: "events are
    lost"), so a connection that lost them is opened again, at most twice."""
    for _attempt in range(3):
        with connect(url, origin=origin) as ws:
            try:
                error = json.loads(ws.recv(timeout=30))
            except ConnectionClosed:
                continue  # the frame was read, then dropped by the client: try again
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=30)
        return error, (ws.close_code, ws.close_reason)
    raise AssertionError("three sockets closed without the error frame")

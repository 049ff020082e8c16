"""The web process (uvicorn, as `serve` runs it) declines WebSocket compression unless
OPENHIVE_WS_COMPRESSION turns it on: a real server, and a client that offers permessage-deflate
as browsers and the `websockets` library do."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "the web server exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the web server did not listen within 30 s")


@pytest.fixture
def web_server(request: pytest.FixtureRequest) -> Iterator[int]:
    env = {k: v for k, v in os.environ.items() if k != "OPENHIVE_WS_COMPRESSION"}
    env.update(getattr(request, "param", {}))
    port = _free_port()
    app = "tests.chat.echo_app:application"
    process = subprocess.Popen(
        [sys.executable, "-m", "openhive.webserver", "127.0.0.1", str(port), app],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_listening(port, process)
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


async def _negotiated(port: int) -> tuple[str | None, str]:
    # The client offers permessage-deflate (its default), as browsers do.
    async with websockets.connect(f"ws://127.0.0.1:{port}/") as ws:
        await ws.send("hello")
        echoed = await asyncio.wait_for(ws.recv(), 10)
        return ws.response.headers.get("Sec-WebSocket-Extensions"), echoed


def test_the_web_server_declines_compression_by_default(web_server: int) -> None:
    extensions, echoed = asyncio.run(_negotiated(web_server))
    assert extensions is None
    assert echoed == "hello"


@pytest.mark.parametrize("web_server", [{"OPENHIVE_WS_COMPRESSION": "true"}], indirect=True)
def test_the_operator_can_turn_compression_on(web_server: int) -> None:
    extensions, echoed = asyncio.run(_negotiated(web_server))
    assert extensions is not None and extensions.startswith("permessage-deflate")
    assert echoed == "hello"

"""A bare ASGI WebSocket echo, for tests that run the real web server (openhive.webserver)
without Django behind it."""

from __future__ import annotations

from typing import Any


async def application(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        await send({"type": "websocket.send", "text": message.get("text") or ""})

"""The web server's access log, written through `logging` (so the secret scrubber and the
JSON format apply) instead of the server's own (daphne's, uvicorn's), which print query
strings as they come, tokens included. Values of credential-like query parameters are
replaced before logging."""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode

logger = logging.getLogger("openhive.access")

CREDENTIAL_PARAMS = frozenset(
    {"token", "access_token", "api_key", "apikey", "key", "secret", "password", "auth", "sig"}
)


def safe_query(query: bytes) -> str:
    """The query string with every credential-like parameter's value masked."""
    if not query:
        return ""
    pairs = parse_qsl(query.decode("latin1"), keep_blank_values=True)
    masked = [(k, "***" if k.lower() in CREDENTIAL_PARAMS else v) for k, v in pairs]
    return "?" + urlencode(masked, safe="*/:")


class AccessLog:
    """ASGI middleware: one line per HTTP request (and per WebSocket handshake)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        if scope["type"] not in ("http", "websocket"):
            return await self.application(scope, receive, send)
        started = time.monotonic()
        status: dict[str, Any] = {"code": None, "bytes": 0}

        async def send_logged(message: dict) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                status["code"] = message["status"]
            elif kind == "http.response.body":
                status["bytes"] += len(message.get("body", b""))
            elif kind == "websocket.accept":
                status["code"] = 101
            elif kind == "websocket.close" and status["code"] is None:
                status["code"] = 403
            await send(message)

        try:
            return await self.application(scope, receive, send_logged)
        finally:
            client = (scope.get("client") or ["-"])[0]
            method = scope.get("method", "WS")
            path = scope.get("path", "") + safe_query(scope.get("query_string", b""))
            logger.info(
                '%s "%s %s" %s %d %.0fms',
                client,
                method,
                path,
                status["code"] or "-",
                status["bytes"],
                (time.monotonic() - started) * 1000,
            )

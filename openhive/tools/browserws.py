"""WebSockets of a page, relayed by us: the page's socket is answered by Playwright's route
(`context.route_web_socket`), and the real connection is opened here, to the address the SSRF
guard checked (the same pinning as every HTTP request of the browser; Chromium never connects).

Page → server: Playwright calls `on_message` on the browser thread; we send on the relay's
connection. Server → page: a reader thread receives, and posts the delivery to the browser
thread (Playwright may only be called there), which runs it between its other work."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

from openhive.core.guards import ssrf

logger = logging.getLogger(__name__)

Post = Callable[[Callable[[], Any]], None]
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


class Relay:
    def __init__(self, route: Any, target: ssrf.Target, origin: str | None, post: Post) -> None:
        self.route, self.target, self.origin, self.post = route, target, origin, post
        self.connection: Any = None
        self.closed = threading.Event()
        self.pending: list[str | bytes] = []
        self.lock = threading.Lock()
        route.on_message(self._from_page)
        route.on_close(lambda code, reason: self.close())
        threading.Thread(target=self._run, name="openhive-browser-ws", daemon=True).start()

    def _from_page(self, message: str | bytes) -> None:
        with self.lock:
            if self.connection is None:
                self.pending.append(message)  # still connecting: sent once open
                return
            connection = self.connection
        with contextlib.suppress(Exception):
            connection.send(message)

    def _run(self) -> None:
        from websockets.sync.client import connect

        try:
            sock = _connect(self.target)
            scheme = "wss" if self.target.url.scheme == "https" else "ws"
            uri = str(self.target.url.copy_with(scheme=scheme))
            with connect(
                uri,
                sock=sock,
                ssl=ssl.create_default_context() if scheme == "wss" else None,
                server_hostname=self.target.host if scheme == "wss" else None,
                origin=self.origin,  # type: ignore[arg-type]
                proxy=None,
                max_size=MAX_MESSAGE_BYTES,
                open_timeout=10,
            ) as connection:
                self._serve(connection)
        except Exception as exc:
            if self.connection is None:
                logger.info("browser WebSocket to %s failed: %s", self.target.host, exc)
                self._close_page(1011, "could not connect")
                return
            # Otherwise the server went away: the page sees its socket close.
        self._close_page(1000, "")

    def _serve(self, connection: Any) -> None:
        with self.lock:
            self.connection, pending = connection, self.pending
            self.pending = []
        for message in pending:
            connection.send(message)
        for message in connection:
            if self.closed.is_set():
                break
            self.post(lambda m=message: self.route.send(m))

    def _close_page(self, code: int, reason: str) -> None:
        if not self.closed.is_set():
            self.closed.set()
            self.post(lambda: self.route.close(code=code, reason=reason))

    def close(self) -> None:
        self.closed.set()
        with self.lock:
            connection = self.connection
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()


def _connect(target: ssrf.Target) -> socket.socket:
    """A TCP connection to one of the checked addresses, never to a new lookup's answer."""
    error: OSError | None = None
    for address in target.addresses:
        try:
            return socket.create_connection((address, target.port), timeout=10)
        except OSError as exc:
            error = exc
    raise error or OSError(f"cannot connect to {target.host}:{target.port}")

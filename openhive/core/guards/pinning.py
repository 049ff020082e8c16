"""Pinned connections: an httpx transport whose TCP connections go only to the addresses the
SSRF guard checked (`openhive.core.guards.ssrf.check_url`), so a second, different DNS answer
(rebinding) is never used. Only the connect is redirected: the Host header and TLS (SNI and
certificate verification) still use the host name.

    target = check_url(url, allow=..., allowed_domains=...)
    with pinned(target):
        response = transport.handle_request(httpx.Request("GET", target.url))
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from openhive.core.guards.ssrf import Target

_PINS: contextvars.ContextVar[dict[tuple[str, int], tuple[str, ...]] | None] = (
    contextvars.ContextVar("openhive_ssrf_pins", default=None)
)


@contextmanager
def pinned(target: Target) -> Iterator[None]:
    """Within this block, a PinnedTransport connects `target`'s host only to its addresses."""
    token = _PINS.set({**(_PINS.get() or {}), target.pin_key: target.addresses})
    try:
        yield
    finally:
        _PINS.reset(token)


def _pinned_addresses(host: str, port: int) -> tuple[str, ...]:
    addresses = (_PINS.get() or {}).get((host.lower(), port))
    if not addresses:
        # Fail closed: a connection nobody checked (a redirect we did not follow by hand, a
        # proxy) is never resolved here.
        raise httpcore.ConnectError(f"no checked address for {host}:{port}")
    return addresses


class _PinnedBackend(httpcore.SyncBackend):
    def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        error: Exception | None = None
        for address in _pinned_addresses(host, port):
            try:
                return super().connect_tcp(address, port, *args, **kwargs)
            except httpcore.ConnectError as exc:
                error = exc
        raise error or httpcore.ConnectError(f"cannot connect to {host}:{port}")


class _PinnedAsyncBackend(httpcore.AnyIOBackend):
    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        error: Exception | None = None
        for address in _pinned_addresses(host, port):
            try:
                return await super().connect_tcp(address, port, *args, **kwargs)
            except httpcore.ConnectError as exc:
                error = exc
        raise error or httpcore.ConnectError(f"cannot connect to {host}:{port}")


def _require_pin(request: httpx.Request) -> None:
    # Checked per request, not only per connection: a pooled keep-alive connection must not
    # carry a request that nobody checked.
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    if not (_PINS.get() or {}).get((request.url.raw_host.decode("ascii").lower(), port)):
        raise httpx.ConnectError(
            f"no checked address for {request.url.host}:{port}", request=request
        )


class PinnedTransport(httpx.HTTPTransport):
    """An httpx transport whose TCP connections go only to addresses pinned with `pinned()`,
    and which refuses any request outside such a block. Never reads proxy settings from the
    environment (a proxy would do its own lookup)."""

    def __init__(self, *, max_connections: int = 20, keepalive_expiry: float = 5.0) -> None:
        super().__init__()
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
            network_backend=_PinnedBackend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _require_pin(request)
        return super().handle_request(request)


class AsyncPinnedTransport(httpx.AsyncHTTPTransport):
    """The asyncio twin of PinnedTransport (for MCP HTTP servers and other async callers)."""

    def __init__(self, *, max_connections: int = 20, keepalive_expiry: float = 5.0) -> None:
        super().__init__()
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
            network_backend=_PinnedAsyncBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        _require_pin(request)
        return await super().handle_async_request(request)

"""An HTTP client for one MCP server whose connections go only to the addresses the SSRF guard
checked when the server was started (DNS resolved once; a rebinding answer is never used). The
MCP SDK speaks `httpx2`, a separate copy of httpx, so `openhive.core.guards.pinning` (httpx)
cannot serve it; this is the same idea for one fixed destination."""

from __future__ import annotations

from typing import Any

import httpcore2
import httpx2

from openhive.core.guards.ssrf import Target


class _FixedBackend(httpcore2.AnyIOBackend):
    def __init__(self, target: Target) -> None:
        self._target = target

    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if (host.lower().strip("[]"), port) != (self._target.host.strip("[]"), self._target.port):
            raise httpcore2.ConnectError(f"no checked address for {host}:{port}")
        error: Exception | None = None
        for address in self._target.addresses:
            try:
                return await super().connect_tcp(address, port, *args, **kwargs)
            except httpcore2.ConnectError as exc:
                error = exc
        raise error or httpcore2.ConnectError(f"cannot connect to {host}:{port}")


class _PinnedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, target: Target) -> None:
        # trust_env=False: a proxy from the environment would do its own DNS lookup.
        super().__init__(trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            max_connections=10,
            keepalive_expiry=30.0,
            network_backend=_FixedBackend(target),
        )


def pinned_client(target: Target, headers: dict[str, str], timeout: float) -> httpx2.AsyncClient:
    """A client for the server at `target` only, sending `headers` with every request."""
    return httpx2.AsyncClient(
        transport=_PinnedTransport(target),
        headers=headers,
        # Reads wait as long as a tool call may take; the SDK holds a stream open for events.
        timeout=httpx2.Timeout(min(timeout, 30.0), read=max(timeout, 300.0)),
        trust_env=False,
        follow_redirects=False,
    )

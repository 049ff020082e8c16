"""Which pages may open the chat socket. Channels' `AllowedHostsOriginValidator` compares only
the host name, so a page on another port or scheme of the same host (another local service,
plain http beside https) could drive a logged-in user's socket. Here the whole origin counts:
scheme, host and port must be the server's own (the request's Host header), or listed in
CSRF_TRUSTED_ORIGINS, as Django's CSRF check does for forms."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
SOCKET_SCHEMES = {"ws": "http", "wss": "https"}


def _normal(scheme: str, netloc: str) -> str | None:
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def origin_allowed(origin: str, host: str, socket_scheme: str) -> bool:
    """`origin` and `host` as the browser sent them; `socket_scheme` is ws or wss."""
    if not origin or origin == "null":
        return False
    parsed = urlsplit(origin)
    if parsed.scheme not in DEFAULT_PORTS:
        return False
    given = _normal(parsed.scheme, parsed.netloc)
    if given is None:
        return False
    trusted = {
        _normal(urlsplit(o).scheme, urlsplit(o).netloc) for o in settings.CSRF_TRUSTED_ORIGINS
    }
    if given in trusted:
        return True
    if not host:
        # No Host header (not HTTP/1.1; only in-process test clients): the host name alone.
        return validate_host(parsed.hostname or "", settings.ALLOWED_HOSTS)
    own = _normal(SOCKET_SCHEMES.get(socket_scheme, "http"), host)
    return given == own and validate_host(parsed.hostname or "", settings.ALLOWED_HOSTS)


class SameOriginValidator:
    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket":
            headers = dict(scope.get("headers") or [])
            origin = headers.get(b"origin", b"").decode("latin1")
            host = headers.get(b"host", b"").decode("latin1")
            if not origin_allowed(origin, host, scope.get("scheme", "ws")):
                return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)

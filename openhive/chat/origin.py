"""Which pages may open the chat socket. Channels' `AllowedHostsOriginValidator` compares only
the host name, so a page on another port or scheme of the same host (another local service,
plain http beside https) could drive a logged-in user's socket. Here the whole origin counts:
scheme, host and port must be the server's own (the request's Host header), or listed in
CSRF_TRUSTED_ORIGINS, as Django's CSRF check does for forms.

A refused socket is told why: a bare HTTP 403 on the handshake reaches no browser script (and
most clients only say "403"). So the handshake is accepted, one `error` frame says what was
wrong, and the socket is closed with 4403 and a reason. Nothing else happens on it: no
identity is looked up and the application never sees it."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

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
                return await refuse(send, receive, origin_refusal(origin, host))
        return await self.application(scope, receive, send)


CLOSE_ORIGIN_NOT_ALLOWED = 4403
CLOSE_NOT_FOUND = 4404


def _shown(header: str) -> str:
    return header if header and len(header) <= 200 else ("none" if not header else "(too long)")


def origin_refusal(origin: str, host: str) -> dict:
    shown = _shown(origin)
    return {
        "type": "error",
        "code": "origin_not_allowed",
        "message": (
            f"this socket only opens for pages of the server's own origin (Origin: {shown}, "
            f"Host: {_shown(host)}): a script must send the Origin header of the server it "
            "connects to (e.g. origin='http://127.0.0.1:8000'), or the operator adds its "
            "origin to CSRF_TRUSTED_ORIGINS"
        ),
        "close_code": CLOSE_ORIGIN_NOT_ALLOWED,
    }


async def refuse(send: Any, receive: Any, error: dict) -> None:
    """Accept, send one `error` frame, close with the error's code and a short reason."""
    message = await receive()
    if message.get("type") != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": json.dumps(error)})
    await send({"type": "websocket.close", "code": error["close_code"], "reason": error["code"]})

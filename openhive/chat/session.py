"""The chat socket's signed-in user, from the session cookie, as Channels' AuthMiddlewareStack
finds it, without that stack's wrapper around every frame the socket sends.

Channels' SessionMiddleware wraps `send` to save a changed session on an HTTP response. A
socket never sends one, yet every ack went through the wrapper's checks (lazy-object reads
of the session): about a tenth of an ack's own cost on the event loop in a 500-socket burst.
Here the session is put in the scope once, at the handshake, and frames go straight out."""

from __future__ import annotations

import functools
from importlib import import_module
from typing import Any

from channels.auth import AuthMiddleware
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware
from django.conf import settings


@functools.cache
def _session_store() -> type:
    return import_module(settings.SESSION_ENGINE).SessionStore


class SocketSessionMiddleware(BaseMiddleware):
    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        key = scope["cookies"].get(settings.SESSION_COOKIE_NAME)
        return await self.inner(dict(scope, session=_session_store()(key)), receive, send)


def socket_auth_stack(inner: Any) -> Any:
    """scope["user"]: the session's user, or AnonymousUser."""
    return CookieMiddleware(SocketSessionMiddleware(AuthMiddleware(inner)))

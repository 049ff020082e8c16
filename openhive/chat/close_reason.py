"""Daphne drops the `reason` of an ASGI `websocket.close` (it passes only the code on to
autobahn), so a client whose frame was refused would see a bare close code. This teaches
daphne's protocol to send the reason too. It is installed where daphne is already loaded
(the web server imports it before the application): importing daphne costs seconds, which no
worker or command should pay."""

from __future__ import annotations

import sys
from typing import Any

_INSTALLED = False


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    module = sys.modules.get("daphne.ws_protocol")
    if module is None:  # not served by daphne (other ASGI servers pass the reason on)
        return
    WebSocketProtocol = module.WebSocketProtocol
    original = WebSocketProtocol.handle_reply

    def handle_reply(self: Any, message: dict) -> None:
        reason = message.get("reason") if message.get("type") == "websocket.close" else None
        if reason and self.state not in (self.STATE_CONNECTING, self.STATE_CLOSING):
            self.sendClose(code=message.get("code") or 1000, reason=str(reason)[:120])
            return
        original(self, message)

    WebSocketProtocol.handle_reply = handle_reply
    _INSTALLED = True

"""The chat socket opens only for pages of the server's own origin (scheme, host and port), or
for origins the operator lists in CSRF_TRUSTED_ORIGINS."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator

from openhive.asgi import application
from openhive.chat.origin import origin_allowed

HOST = "127.0.0.1:8000"


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://127.0.0.1:8000", True),
        ("HTTP://127.0.0.1:8000", True),
        ("http://127.0.0.1:9999", False),  # another service on the same host
        ("https://127.0.0.1:8000", False),  # another scheme
        ("http://127.0.0.1", False),  # port 80 is not 8000
        ("http://evil.example:8000", False),
        ("null", False),
        ("", False),
        ("file://", False),
        ("http://127.0.0.1:notaport", False),
    ],
)
def test_only_the_servers_own_origin_opens_the_socket(origin, allowed):
    assert origin_allowed(origin, HOST, "ws") is allowed


def test_a_secure_socket_needs_an_https_origin_on_its_default_port():
    assert (
        origin_allowed("https://chat.example", "chat.example", "wss") is False
    )  # not allowed host
    assert origin_allowed("https://localhost", "localhost", "wss") is True
    assert origin_allowed("http://localhost", "localhost", "wss") is False


def test_origins_the_operator_trusts_are_accepted(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://ops.example.com"]
    assert origin_allowed("https://ops.example.com", HOST, "ws") is True
    assert origin_allowed("https://ops.example.com:8443", HOST, "ws") is False


async def test_the_asgi_application_opens_for_its_own_origin():
    communicator = WebsocketCommunicator(
        application,
        "/ws/chat/",
        headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", HOST.encode())],
    )
    ok, _ = await communicator.connect(timeout=15)
    assert ok
    # No token, no session: the chat's own answer, not the origin check's.
    assert (await communicator.receive_json_from(timeout=15))["code"] == "not_authorized"
    await communicator.disconnect()


@pytest.mark.parametrize("origin", [b"http://127.0.0.1:8001", b"https://evil.example", b""])
async def test_a_foreign_origin_is_told_why_then_closed_with_4403(origin):
    headers = [(b"host", HOST.encode())] + ([(b"origin", origin)] if origin else [])
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    ok, _ = await communicator.connect(timeout=15)
    assert ok  # accepted only to say why: the chat application never runs
    error = await communicator.receive_json_from(timeout=15)
    assert error["type"] == "error" and error["code"] == "origin_not_allowed"
    assert "CSRF_TRUSTED_ORIGINS" in error["message"] and "Origin" in error["message"]
    closed = await communicator.receive_output(timeout=15)
    assert closed == {"type": "websocket.close", "code": 4403, "reason": "origin_not_allowed"}

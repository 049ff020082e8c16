"""The chat socket answers at /ws/chat/ and /ws/chat; any other socket path gets a readable
`error` frame and a close, never a server error."""

from __future__ import annotations

import logging

import pytest
from channels.testing import WebsocketCommunicator

from openhive.asgi import application
from trust.services import api_token_create

from .conftest import ORIGIN, receive_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_db_connections"),
]


@pytest.fixture
def token(django_user_model) -> str:
    django_user_model.objects.create_user(username="alice", password="pw-alice-123")
    return api_token_create(username="alice")[1]


@pytest.mark.parametrize("path", ["/ws/chat/", "/ws/chat"])
async def test_the_chat_socket_opens_with_or_without_the_trailing_slash(path, token):
    communicator = WebsocketCommunicator(application, f"{path}?token={token}", headers=[ORIGIN])
    ok, _ = await communicator.connect(timeout=15)
    assert ok
    assert (await receive_until(communicator, "topic_list"))[-1]["topics"] == []
    await communicator.disconnect()


@pytest.mark.parametrize("path", ["/ws/chats/", "/ws/", "/ws/chat/extra"])
async def test_an_unknown_socket_path_is_told_where_the_chat_is(path, caplog):
    communicator = WebsocketCommunicator(application, path, headers=[ORIGIN])
    with caplog.at_level(logging.DEBUG):
        ok, _ = await communicator.connect(timeout=15)
        assert ok
        error = await communicator.receive_json_from(timeout=15)
        closed = await communicator.receive_output(timeout=15)
    assert error["code"] == "not_found" and "/ws/chat/" in error["message"]
    assert closed == {"type": "websocket.close", "code": 4404, "reason": "not_found"}
    assert not [r for r in caplog.records if r.exc_info]

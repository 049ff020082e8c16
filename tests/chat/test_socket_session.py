"""The chat socket knows a signed-in browser by its session cookie, as the chat page connects."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from openhive.chat.models import Message

from .conftest import connect, receive_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fast_hashing", "close_db_connections"),
]


def _session_cookie(username: str) -> bytes:
    user = get_user_model().objects.create_user(username, password="pw-12345678")
    client = Client()
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}".encode()


async def test_a_signed_in_session_chats_as_its_user():
    cookie = await sync_to_async(_session_cookie)("carol")
    communicator = await connect("/ws/chat/", headers=[(b"cookie", cookie)])
    (topics,) = await receive_until(communicator, "topic_list")
    assert topics["topics"] == []
    await communicator.send_json_to({"type": "message", "content": "hello"})
    seen = await receive_until(communicator, "ack")
    stored = await Message.objects.aget(pk=seen[-1]["message_id"])
    assert stored.sender_id == "carol" and stored.content == "hello"
    await communicator.disconnect()


async def test_a_forged_or_stale_session_cookie_is_nobody():
    cookie = f"{settings.SESSION_COOKIE_NAME}=not-a-session-key".encode()
    communicator = await connect("/ws/chat/", headers=[(b"cookie", cookie)])
    refused = await communicator.receive_json_from(timeout=15)
    assert refused["type"] == "error" and refused["code"] == "not_authorized"
    assert (await communicator.receive_output(timeout=15))["type"] == "websocket.close"

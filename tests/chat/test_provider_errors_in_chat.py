"""A chat message while the model provider cannot be used: the person chatting reads the real
reason (a broken providers.yaml names the file, the profile and the key or variable), and a
failing provider is a plain sentence, not litellm's advice for developers."""

from __future__ import annotations

import pytest
import yaml
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections

from openhive.asgi import application
from openhive.chat.dbpool import close_db_connections
from openhive.engine.models import Session
from trust.services import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = [(b"origin", b"http://127.0.0.1")]


@pytest.fixture(autouse=True)
async def close_connections_after():
    yield
    await sync_to_async(connections.close_all)()
    await sync_to_async(close_db_connections)()


@pytest.fixture
def token(django_user_model) -> str:
    django_user_model.objects.create_user(username="alice", password="pw-alice-123")
    return api_token_create(username="alice")[1]


async def _error_for(token: str, text: str) -> dict:
    communicator = WebsocketCommunicator(application, f"/ws/chat/?token={token}", headers=ORIGIN)
    connected, _ = await communicator.connect(timeout=15)
    assert connected
    await communicator.send_json_to({"type": "message", "content": text})
    while True:
        message = await communicator.receive_json_from(timeout=30)
        if message["type"] in ("error", "response"):
            await communicator.disconnect()
            return message


async def test_an_unset_key_variable_is_named_in_the_chat_error(token, openhive_dirs, monkeypatch):
    monkeypatch.delenv("ZZ_CHAT_KEY", raising=False)
    providers = openhive_dirs / "data" / "config" / "providers.yaml"
    providers.write_text(
        yaml.safe_dump(
            {"profiles": {"default": {"model": "openai/x", "api_key_env": "ZZ_CHAT_KEY"}}}
        )
    )
    error = await _error_for(token, "hello")
    assert error["type"] == "error" and error["code"] == "provider_not_configured"
    assert "No LLM provider is configured" not in error["message"]
    assert 'profile "default"' in error["message"] and "$ZZ_CHAT_KEY" in error["message"]
    assert "providers.yaml" in error["message"]


async def test_a_profile_without_model_is_named_in_the_chat_error(token, openhive_dirs):
    providers = openhive_dirs / "data" / "config" / "providers.yaml"
    providers.write_text(yaml.safe_dump({"profiles": {"default": {"temperature": 0.2}}}))
    error = await _error_for(token, "hello")
    assert error["code"] == "provider_not_configured"
    assert 'profile "default"' in error["message"] and 'missing "model"' in error["message"]


async def test_a_provider_that_refuses_the_key_is_a_plain_sentence(
    token, scripted_provider, settings
):
    settings.OPENHIVE = {**settings.OPENHIVE, "LLM_RETRIES": 0}
    scripted_provider(
        [
            {
                "when": {},
                "reply": {
                    "error": {
                        "status": 401,
                        "message": "AuthenticationError: bad key. Handle with `litellm.Auth`",
                    }
                },
            }
        ]
    )
    error = await _error_for(token, "hello")
    assert error["type"] == "error"
    assert error["message"] == (
        'The model provider refused the credentials of profile "default". An operator should '
        "check its API key."
    )
    # The operator's detail stays in the session's record.
    session = await sync_to_async(Session.objects.order_by("-pk").first)()
    assert "401" in session.error or "AuthenticationError" in session.error

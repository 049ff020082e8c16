"""The chat socket through Channels' WebsocketCommunicator and the real ASGI application."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections

from openhive.asgi import application
from openhive.chat.dbpool import close_db_connections
from openhive.chat.models import Message, OutboxMessage, Topic
from trust.services import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = [(b"origin", b"http://127.0.0.1")]


@pytest.fixture(autouse=True)
async def close_connections_after():
    yield
    # Async ORM calls leave connections open in asgiref's thread (breaks PG teardown).
    await sync_to_async(connections.close_all)()
    await sync_to_async(close_db_connections)()


@pytest.fixture
def token(django_user_model) -> str:
    django_user_model.objects.create_user(username="alice", password="pw-alice-123")
    return api_token_create(username="alice")[1]


async def _connect(path: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, path, headers=ORIGIN)
    connected, _ = await communicator.connect(timeout=15)
    assert connected
    return communicator


async def _receive_until(communicator: WebsocketCommunicator, wanted: str) -> list[dict]:
    seen = []
    while True:
        message = await communicator.receive_json_from(timeout=20)
        seen.append(message)
        if message["type"] == wanted:
            return seen


async def test_anonymous_socket_gets_one_not_authorized_error_and_is_closed():
    communicator = await _connect("/ws/chat/")
    message = await communicator.receive_json_from(timeout=10)
    assert message["type"] == "error" and message["code"] == "not_authorized"
    assert (await communicator.receive_output(timeout=10))["type"] == "websocket.close"


async def test_invalid_token_is_treated_as_anonymous():
    communicator = await _connect("/ws/chat/?token=ohk_not-a-real-token")
    assert (await communicator.receive_json_from(timeout=10))["code"] == "not_authorized"
    await communicator.disconnect()


async def test_message_without_provider_gets_a_clear_error_saying_how_to_configure(token):
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "hello"})
    seen = await _receive_until(communicator, "error")
    assert seen[0]["type"] == "ack"
    error = seen[-1]
    assert error["code"] == "provider_not_configured"
    assert "providers.yaml" in error["message"] and "init --demo" in error["message"]
    await communicator.disconnect()


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ({"type": "message", "content": ""}, "non-empty"),
        ({"type": "message"}, "non-empty"),
        ({"type": "shout", "content": "hi"}, "unknown message type"),
        ({"type": "message", "content": "hi", "topic_id": "one"}, "topic_id"),
        ({"type": "message", "content": "x" * 20_001}, "longer than"),
        ({"type": "message", "content": "hi", "topic_id": 2**70}, "topic_id"),
        ({"type": "message", "content": "hi", "new_topic": "yes"}, "new_topic"),
        ({"type": "message", "content": "hi", "topic_id": 1, "new_topic": True}, "not both"),
    ],
)
async def test_bad_messages_get_a_bad_request_error_and_store_nothing(token, payload, fragment):
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_json_to(payload)
    error = await communicator.receive_json_from(timeout=5)
    assert error["type"] == "error" and error["code"] == "bad_request"
    assert fragment in error["message"]
    assert await Message.objects.acount() == 0
    await communicator.disconnect()


async def test_unknown_topic_id_is_refused(token):
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "hi", "topic_id": 999})
    error = await communicator.receive_json_from(timeout=5)
    assert error["code"] == "unknown_topic"
    await communicator.disconnect()


async def test_turn_streams_tool_events_then_the_response(token, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"team": "main", "last": "user"},
                "reply": {"tool_calls": [{"name": "list_teams", "arguments": {}}]},
            },
            {"when": {"last": "tool", "tool": "list_teams"}, "reply": {"content": "No teams yet."}},
        ]
    )
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "which teams?"})
    seen = await _receive_until(communicator, "response")
    kinds = [(m["type"], m.get("event")) for m in seen if m["type"] not in ("topic_list", "delta")]
    assert kinds == [
        ("ack", None),
        ("event", "tool_call"),
        ("event", "tool_result"),
        ("response", None),
    ]
    assert seen[-1]["content"] == "No teams yet." and seen[-1]["topic_name"] == "which teams?"
    # The first message opened a topic: the new topic list came before the answer.
    lists = [m for m in seen if m["type"] == "topic_list"]
    assert lists and lists[-1]["topics"][0]["name"] == "which teams?"
    assert [m.role async for m in Message.objects.order_by("id")] == ["user", "assistant"]
    await communicator.disconnect()


async def test_the_reply_streams_as_deltas_before_the_response(token, scripted_provider):
    answer = "The ops team is ready and has three tasks queued for tonight."
    scripted_provider([{"when": {}, "reply": {"content": answer}}])
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "status?"})
    seen = await _receive_until(communicator, "response")
    deltas = [m for m in seen if m["type"] == "delta"]
    response = seen[-1]
    assert len(deltas) > 2 and "".join(d["content"] for d in deltas) == answer
    assert {d["topic_id"] for d in deltas} == {response["topic_id"]}
    assert seen.index(deltas[-1]) < seen.index(response) and response["content"] == answer
    await communicator.disconnect()


async def test_outbox_written_while_offline_is_delivered_on_reconnect(token, django_user_model):
    user = await django_user_model.objects.aget(username="alice")
    channel = f"ws:user:{user.pk}"
    topic = await Topic.objects.acreate(channel_id=channel, name="General")
    await OutboxMessage.objects.acreate(
        channel_id=channel, topic=topic, team_name="ops", content="[ops] done while you were away"
    )
    communicator = await _connect(f"/ws/chat/?token={token}")
    seen = await _receive_until(communicator, "notification")
    assert seen[-1]["content"] == "[ops] done while you were away"
    assert seen[-1]["topic_id"] == topic.pk
    assert await OutboxMessage.objects.filter(delivered_at__isnull=True).acount() == 0
    await communicator.disconnect()


@pytest.mark.parametrize(
    "frame, fragment",
    [
        ({"text_data": "{not json"}, "not valid JSON"),
        ({"bytes_data": b"\x00\x01"}, "binary frames"),
        ({"text_data": "[1, 2, 3]"}, "JSON object"),
        ({"text_data": '{"type": "message", "content": "a\\u0000b"}'}, "NUL character"),
        ({"text_data": '{"type": "message", "content": "a\\ud800b"}'}, "unpaired surrogate"),
        ({"text_data": '{"type": "message", "content": "hi", "x\\u0000": 1}'}, "NUL"),
        ({"text_data": '{"type": "message", "topic_id": "\\udfff"}'}, "unpaired surrogate"),
        ({"text_data": "[" * 30_000 + "]" * 30_000}, "nested too deeply"),
        ({"text_data": '{"a":' * 500 + "1" + "}" * 500}, "nested more than 100 levels"),
    ],
)
async def test_malformed_frames_get_an_error_and_the_socket_stays_usable(
    token, scripted_provider, frame, fragment
):
    scripted_provider([{"when": {}, "reply": {"content": "still here"}}])
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_to(**frame)
    error = await communicator.receive_json_from(timeout=5)
    assert error["code"] == "bad_request" and fragment in error["message"]
    await communicator.send_json_to({"type": "message", "content": "hello?"})
    seen = await _receive_until(communicator, "response")
    assert seen[-1]["content"] == "still here"
    await communicator.disconnect()


async def test_a_frame_over_the_limit_gets_an_error_then_a_close_with_a_reason(token):
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_to(text_data="x" * 70_000)
    error = await communicator.receive_json_from(timeout=5)
    assert error["code"] == "bad_request" and "larger than 64000" in error["message"]
    close = await communicator.receive_output(timeout=5)
    assert close == {
        "type": "websocket.close",
        "code": 1009,
        "reason": "frame larger than 64000 characters",
    }
    assert await Message.objects.acount() == 0


def test_daphne_sends_the_close_reason_it_is_given():
    from daphne.ws_protocol import WebSocketProtocol

    from openhive.chat.close_reason import install

    install()  # what the web process does once daphne has loaded the application

    sent = []

    class Protocol(WebSocketProtocol):
        def __init__(self) -> None:
            self.state = self.STATE_OPEN

        def sendClose(self, code=None, reason=None):
            sent.append((code, reason))

    Protocol().handle_reply({"type": "websocket.close", "code": 1009, "reason": "too big"})
    Protocol().handle_reply({"type": "websocket.close", "code": 4401})
    assert sent == [(1009, "too big"), (4401, None)]


async def test_a_broken_main_config_gives_the_user_a_sentence_not_a_server_path(
    token, scripted_provider
):
    from openhive.core import paths
    from teams.config import config_path

    scripted_provider([{"when": {}, "reply": {"content": "never"}}])
    config_path("main").parent.mkdir(parents=True, exist_ok=True)
    config_path("main").write_text("allowed_tool: ['*']\n")
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "hello"})
    error = (await _receive_until(communicator, "error"))[-1]
    assert error["code"] == "config_error"
    assert "configuration has a problem" in error["message"]
    assert str(paths.data_dir()) not in error["message"] and "allowed_tool" not in str(error)
    await communicator.disconnect()


async def test_a_failed_tool_is_reported_as_failed_with_its_error(token, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"team": "main", "last": "user"},
                "reply": {"tool_calls": [{"name": "shutdown_team", "arguments": {"name": "nope"}}]},
            },
            {"when": {"last": "tool"}, "reply": {"content": "There is no team nope."}},
        ]
    )
    communicator = await _connect(f"/ws/chat/?token={token}")
    await _receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "stop team nope"})
    seen = await _receive_until(communicator, "response")
    events = [m for m in seen if m["type"] == "event"]
    assert [(e["event"], e.get("success")) for e in events] == [
        ("tool_call", None),
        ("tool_result", False),
    ]
    failed = events[-1]
    assert "nope" in failed["error"] and failed["code"] and failed["at"]
    assert failed["topic_id"] == seen[-1]["topic_id"]
    await communicator.disconnect()

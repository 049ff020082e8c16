"""Topic turns over the socket: the agent opening a topic, parallel turns across topics,
order within one, and history rebuilt from the database after a restart."""

from __future__ import annotations

import itertools

import pytest
from asgiref.sync import sync_to_async

from openhive.chat.models import Message, Topic
from openhive.engine.models import LlmExchange, Session, ToolCall
from trust.services import api_token_create

from .conftest import connect, receive_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_db_connections", "fast_hashing"),
]


@pytest.fixture
def alice(django_user_model) -> tuple[str, str]:
    """(API token, channel id)."""
    user = django_user_model.objects.create_user(username="alice", password="pw-123456")
    return api_token_create(username="alice")[1], f"ws:user:{user.pk}"


async def open_socket(token: str):
    communicator = await connect(f"/ws/chat/?token={token}")
    first = await receive_until(communicator, "topic_list")
    return communicator, first[-1]


async def test_with_one_topic_the_agent_decides_to_open_a_new_one(alice, scripted_provider):
    token, _ = alice
    scripted_provider(
        [
            {
                "when": {"team": "main", "last": "user", "matches": "(?i)vacation"},
                "reply": {
                    "tool_calls": [{"name": "start_new_topic", "arguments": {"name": "Vacation"}}]
                },
            },
            {
                "when": {"last": "tool", "tool": "start_new_topic"},
                "reply": {"content": "New subject noted."},
            },
            {"when": {"team": "main"}, "reply": {"content": "On it."}},
        ]
    )
    communicator, _ = await open_socket(token)
    await communicator.send_json_to({"type": "message", "content": "check the build"})
    first = (await receive_until(communicator, "response"))[-1]
    await communicator.send_json_to({"type": "message", "content": "unrelated: plan my vacation"})
    seen = await receive_until(communicator, "response")
    second = seen[-1]
    assert second["topic_name"] == "Vacation" and second["topic_id"] != first["topic_id"]
    assert any(
        m["type"] == "topic_list"
        and {t["name"] for t in m["topics"]} == {"check the build", "Vacation"}
        for m in seen
    )
    moved = await Message.objects.filter(topic_id=second["topic_id"]).acount()
    assert moved == 2  # the user's message and the answer were filed under the new topic
    await communicator.disconnect()


async def test_the_new_topic_tool_is_refused_when_the_classifier_routed(alice, scripted_provider):
    token, channel = alice
    scripted_provider(
        [
            {"when": {"team": "classifier"}, "reply": {"content": '{"new_topic": "Third"}'}},
            {
                "when": {"team": "main", "last": "user"},
                "reply": {
                    "tool_calls": [{"name": "start_new_topic", "arguments": {"name": "Fourth"}}]
                },
            },
            {"when": {"team": "main", "last": "tool"}, "reply": {"content": "ok"}},
        ]
    )
    await sync_to_async(Topic.objects.create)(channel_id=channel, name="A")
    await sync_to_async(Topic.objects.create)(channel_id=channel, name="B")
    communicator, _ = await open_socket(token)
    await communicator.send_json_to({"type": "message", "content": "hello"})
    response = (await receive_until(communicator, "response"))[-1]
    assert response["topic_name"] == "Third"
    call = await ToolCall.objects.aget(tool="start_new_topic")
    assert call.success is False and call.result["code"] == "TOOL_NOT_ALLOWED"
    assert not await Topic.objects.filter(name="Fourth").aexists()
    await communicator.disconnect()


async def test_turns_of_different_topics_run_in_parallel(alice, scripted_provider):
    token, channel = alice
    scripted_provider([{"when": {"team": "main"}, "reply": {"content": "done", "delay_ms": 800}}])
    a = await sync_to_async(Topic.objects.create)(channel_id=channel, name="A")
    b = await sync_to_async(Topic.objects.create)(channel_id=channel, name="B")
    communicator, _ = await open_socket(token)
    await communicator.send_json_to({"type": "message", "content": "one", "topic_id": a.pk})
    await communicator.send_json_to({"type": "message", "content": "two", "topic_id": b.pk})
    seen = await receive_until(communicator, "response", count=2)
    assert {m["topic_id"] for m in seen if m["type"] == "response"} == {a.pk, b.pk}
    first, second = [s async for s in Session.objects.order_by("started_at")]
    # Overlapping sessions: the second started before the first had finished.
    assert second.started_at < first.finished_at
    await communicator.disconnect()


async def test_turns_of_one_topic_run_in_order_with_the_earlier_turns_as_history(
    alice, scripted_provider
):
    token, channel = alice
    scripted_provider(
        [
            {
                "when": {"team": "main", "matches": "^first"},
                "reply": {"content": "answer 1", "delay_ms": 300},
            },
            {"when": {"team": "main", "matches": "^second"}, "reply": {"content": "answer 2"}},
            {"when": {"team": "main", "matches": "^third"}, "reply": {"content": "answer 3"}},
        ]
    )
    topic = await sync_to_async(Topic.objects.create)(channel_id=channel, name="T")
    communicator, _ = await open_socket(token)
    for text in ("first", "second", "third"):
        await communicator.send_json_to({"type": "message", "content": text, "topic_id": topic.pk})
    seen = await receive_until(communicator, "response", count=3)
    assert [m["content"] for m in seen if m["type"] == "response"] == [
        "answer 1",
        "answer 2",
        "answer 3",
    ]
    sessions = [s async for s in Session.objects.order_by("started_at")]
    for earlier, later in itertools.pairwise(sessions):
        assert earlier.finished_at <= later.started_at
    last = await LlmExchange.objects.filter(session=sessions[-1]).afirst()
    said = [m["content"] for m in last.request_messages if m["role"] in ("user", "assistant")]
    assert said == ["first", "answer 1", "second", "answer 2", "third"]
    await communicator.disconnect()


async def test_history_is_rebuilt_from_the_database_after_a_restart(alice, scripted_provider):
    token, _ = alice
    scripted_provider([{"when": {"team": "main"}, "reply": {"content": "noted"}}])
    communicator, _ = await open_socket(token)
    await communicator.send_json_to({"type": "message", "content": "the server is db-7"})
    topic_id = (await receive_until(communicator, "response"))[-1]["topic_id"]
    await communicator.disconnect()
    # A restart: no consumer state survives; topics were idled by the quiet period.
    await sync_to_async(Topic.objects.update)(state="idle")

    communicator, topic_list = await open_socket(token)
    assert topic_list["topics"] == [{"id": topic_id, "name": "the server is db-7", "state": "idle"}]
    await communicator.send_json_to(
        {"type": "message", "content": "restart it", "topic_id": topic_id}
    )
    seen = await receive_until(communicator, "response")
    assert seen[-1]["topic_id"] == topic_id
    session = await Session.objects.order_by("-started_at").afirst()
    exchange = await LlmExchange.objects.filter(session=session).afirst()
    said = [m["content"] for m in exchange.request_messages if m["role"] in ("user", "assistant")]
    assert said == ["the server is db-7", "noted", "restart it"]
    await communicator.disconnect()

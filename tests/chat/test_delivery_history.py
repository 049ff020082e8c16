"""What reached the person from a team (a result, a notification, an escalation) stays in the
topic's history: stored with the outbox row, read by the page, the REST API and the socket."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.apps import apps as django_apps
from django.db import connections

from openhive.chat.dbpool import close_db_connections
from openhive.chat.models import Message, OutboxMessage, Topic
from openhive.chat.selectors import topic_history
from openhive.chat.services import outbox_put
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from tests.chat.conftest import connect, receive_until
from trust.services import api_token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_hashing")]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-123456")


@pytest.fixture
def topic(alice) -> Topic:
    topic = Topic.objects.create(channel_id=f"ws:user:{alice.pk}", name="Disk")
    question = Message.objects.create(
        topic=topic, channel_id=topic.channel_id, role="user", content="check the disk"
    )
    Message.objects.create(
        topic=topic,
        channel_id=topic.channel_id,
        role="assistant",
        content="I asked ops.",
        in_reply_to=question,
    )
    return topic


@pytest.fixture
def ops(main_team):
    return team_spawn(parent=main_team, name="ops", description="Operations").team


def test_a_tasks_result_is_in_its_topics_history_after_the_answer(
    client, alice, topic, ops, scripted_provider
):
    scripted_provider([{"when": {"team": "ops"}, "reply": {"content": "Disk is at 40%."}}])
    task = task_enqueue(
        team=ops, text="Check the disk", source_channel=topic.channel_id, topic_id=topic.pk
    )
    assert run_task(task.pk) == "done"
    client.force_login(alice)
    data = client.get(f"/chat/topics/{topic.pk}/messages/").json()
    rows = [(m["role"], m["team"], m["content"]) for m in data["messages"]]
    assert rows == [
        ("user", "", "check the disk"),
        ("assistant", "", "I asked ops."),
        ("result", "ops", "Disk is at 40%."),
    ]
    result = data["messages"][-1]
    assert result["task_id"] == task.pk and result["task_status"] == "done"
    assert result["created_at"] and result["task_url"] == ""  # not staff: no admin link
    # The outbox row keeps the text channels without a page show, and points at the copy.
    item = OutboxMessage.objects.get()
    assert item.content == "[ops] Disk is at 40%." and item.message_id == result["id"]


def test_the_rest_history_carries_results_with_team_task_and_time(client, alice, topic):
    outbox_put(
        channel_id=topic.channel_id,
        topic_id=topic.pk,
        team_name="ops",
        content="[ops] Disk is at 40%.",
        task_id=41,
        kind=OutboxMessage.Kind.RESULT,
        task_status="done",
    )
    outbox_put(
        channel_id=topic.channel_id,
        topic_id=topic.pk,
        team_name="ops",
        content="[ops] Escalation: the disk is nearly full",
        kind=OutboxMessage.Kind.ESCALATION,
    )
    headers = {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(username='alice')[1]}"}
    rows = client.get(f"/api/v1/topics/{topic.pk}/messages", **headers).json()
    assert [(m["role"], m["team"], m["task_id"], m["task_status"]) for m in rows] == [
        ("user", "", None, ""),
        ("assistant", "", None, ""),
        ("result", "ops", 41, "done"),
        ("escalation", "ops", None, ""),
    ]
    assert rows[2]["content"] == "Disk is at 40%." and rows[2]["created_at"]
    assert rows[3]["content"] == "Escalation: the disk is nearly full"


def test_staff_get_a_link_to_the_task_in_the_admin(client, alice, topic):
    alice.is_staff = True
    alice.save()
    outbox_put(
        channel_id=topic.channel_id, topic_id=topic.pk, team_name="ops", content="x", task_id=7
    )
    client.force_login(alice)
    last = client.get(f"/chat/topics/{topic.pk}/messages/").json()["messages"][-1]
    assert last["task_url"] == "/admin/tasks/task/7/change/"


def test_a_delivery_without_a_topic_is_in_the_notifications_not_in_a_topic(client, alice, topic):
    outbox_put(channel_id=topic.channel_id, team_name="ops", content="[ops] trigger paused")
    outbox_put(channel_id="ws:user:999999", team_name="ops", content="someone else's")
    client.force_login(alice)
    history = client.get(f"/chat/topics/{topic.pk}/messages/").json()["messages"]
    assert [m["role"] for m in history] == ["user", "assistant"]
    notes = client.get("/chat/notifications/").json()["notifications"]
    assert [(n["role"], n["team"], n["content"], n["topic_id"]) for n in notes] == [
        ("notification", "ops", "trigger paused", None)
    ]
    client.logout()
    assert client.get("/chat/notifications/").status_code == 401


def test_the_models_history_holds_only_the_conversation(topic):
    outbox_put(channel_id=topic.channel_id, topic_id=topic.pk, team_name="ops", content="done")
    assert topic_history(topic=topic, limit=50) == [
        {"role": "user", "content": "check the disk"},
        {"role": "assistant", "content": "I asked ops."},
    ]


def test_a_failed_bootstrap_reaches_the_chat_as_a_notification_with_the_tasks_status(
    alice, ops, topic
):
    from tasks.services.ends import notify_chat

    task = ops.tasks.get(type=Task.Type.BOOTSTRAP)
    Task.objects.filter(pk=task.pk).update(
        source_channel=topic.channel_id, topic_id=topic.pk, status="failed", result="no provider"
    )
    task.refresh_from_db()
    notify_chat(task)
    stored = Message.objects.get(role="notification")
    assert stored.content == "Team bootstrap failed: no provider"
    assert (stored.team_name, stored.task_id, stored.task_status) == ("ops", task.pk, "failed")


def test_deliveries_from_before_the_upgrade_are_copied_into_the_history(topic):
    from importlib import import_module

    migration = import_module("openhive.chat.migrations.0005_message_deliveries_in_history")
    old = OutboxMessage.objects.create(
        channel_id=topic.channel_id, topic=topic, team_name="ops", content="[ops] old result"
    )
    migration.copy_deliveries(django_apps, None)
    migration.copy_deliveries(django_apps, None)  # a second run copies nothing twice
    old.refresh_from_db()
    copy = Message.objects.get(role="notification")
    assert old.message_id == copy.pk and copy.content == "old result"
    assert copy.topic_id == topic.pk and copy.created_at == old.created_at


@pytest.fixture
async def close_connections_after():
    yield
    await sync_to_async(connections.close_all)()
    await sync_to_async(close_db_connections)()


@pytest.mark.usefixtures("close_connections_after")
async def test_the_socket_delivers_the_stored_copy_with_its_id_kind_and_task(alice, topic):
    await sync_to_async(outbox_put)(
        channel_id=topic.channel_id,
        topic_id=topic.pk,
        team_name="ops",
        content="[ops] Disk is at 40%.",
        task_id=41,
        kind=OutboxMessage.Kind.RESULT,
        task_status="done",
    )
    token = (await sync_to_async(api_token_create)(username="alice"))[1]
    communicator = await connect(f"/ws/chat/?token={token}")
    frame = (await receive_until(communicator, "notification"))[-1]
    stored = await Message.objects.aget(role="result")
    assert frame["kind"] == "result" and frame["team"] == "ops"
    assert frame["content"] == "Disk is at 40%." and frame["message_id"] == stored.pk
    assert (frame["task_id"], frame["task_status"], frame["topic_id"]) == (41, "done", topic.pk)
    assert frame["at"] == stored.created_at.isoformat()
    await communicator.disconnect()

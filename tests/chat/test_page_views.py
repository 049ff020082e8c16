"""The chat page and the topic history it reads, through Django's test client."""

from __future__ import annotations

import pytest

from openhive.chat.models import Message, Topic

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_hashing")]


@pytest.fixture
def alice(client, django_user_model):
    user = django_user_model.objects.create_user(username="alice", password="pw-123456")
    client.force_login(user)
    return user


def test_the_page_sends_strangers_to_the_login(client):
    response = client.get("/chat/")
    assert response.status_code == 302 and response["Location"].startswith("/chat/login/")


def test_the_page_is_served_to_any_logged_in_user(client, alice):
    page = client.get("/chat/").content.decode()
    assert 'role="log"' in page and "chat/chat.js" in page and "alice" in page


def test_login_page_logs_in_and_returns_to_the_chat(client, django_user_model):
    django_user_model.objects.create_user(username="bob", password="pw-123456")
    response = client.post("/chat/login/", {"username": "bob", "password": "pw-123456"})
    assert response.status_code == 302 and response["Location"] == "/chat/"


def test_history_of_an_own_topic_in_order(client, alice):
    topic = Topic.objects.create(channel_id=f"ws:user:{alice.pk}", name="Billing")
    question = Message.objects.create(
        topic=topic, channel_id=topic.channel_id, role="user", content="why?"
    )
    Message.objects.create(
        topic=topic,
        channel_id=topic.channel_id,
        role="assistant",
        content="because",
        in_reply_to=question,
    )
    data = client.get(f"/chat/topics/{topic.pk}/messages/").json()
    assert data["topic"]["name"] == "Billing"
    assert [(m["role"], m["content"]) for m in data["messages"]] == [
        ("user", "why?"),
        ("assistant", "because"),
    ]


def test_history_of_someone_elses_topic_is_not_found(client, alice):
    topic = Topic.objects.create(channel_id="ws:user:999999", name="Private")
    response = client.get(f"/chat/topics/{topic.pk}/messages/")
    assert response.status_code == 404 and "detail" in response.json()


def test_history_needs_a_login(client):
    response = client.get("/chat/topics/1/messages/")
    assert response.status_code == 401 and "detail" in response.json()


def test_topics_api_lists_every_topic_and_its_messages_for_an_operator_token(
    client, django_user_model
):
    from trust.services import api_token_create

    django_user_model.objects.create_user(username="ops", password="pw-123456", is_staff=True)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(username='ops')[1]}"}
    topic = Topic.objects.create(channel_id="ws:user:5", name="Billing")
    Message.objects.create(
        topic=topic,
        channel_id=topic.channel_id,
        role="user",
        content="hi",
        trust_decision="allowed",
    )
    listed = client.get("/api/v1/topics?channel_id=ws:user:5", **headers).json()
    assert [t["name"] for t in listed] == ["Billing"]
    messages = client.get(f"/api/v1/topics/{topic.pk}/messages", **headers).json()
    assert [(m["content"], m["trust_decision"]) for m in messages] == [("hi", "allowed")]
    assert client.get("/api/v1/topics/999999/messages", **headers).status_code == 404
    assert client.get("/api/v1/topics").status_code == 401


def test_a_chat_users_token_reads_only_its_own_topics(client, django_user_model):
    from trust.services import api_token_create

    user = django_user_model.objects.create_user(username="carol", password="pw-123456")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(username='carol')[1]}"}
    own = Topic.objects.create(channel_id=f"ws:user:{user.pk}", name="Mine")
    other = Topic.objects.create(channel_id="ws:user:999999", name="Someone else's")
    for topic in (own, other):
        Message.objects.create(
            topic=topic, channel_id=topic.channel_id, role="user", content=f"in {topic.name}"
        )
    assert [t["name"] for t in client.get("/api/v1/topics", **headers).json()] == ["Mine"]
    asked = client.get("/api/v1/topics?channel_id=ws:user:999999", **headers)
    assert asked.status_code == 200 and asked.json() == []
    mine = client.get(f"/api/v1/topics/{own.pk}/messages", **headers)
    assert [m["content"] for m in mine.json()] == ["in Mine"]
    theirs = client.get(f"/api/v1/topics/{other.pk}/messages", **headers)
    assert theirs.status_code == 404 and "Someone" not in theirs.content.decode()


def test_history_carries_the_topics_tool_calls_with_failures_and_errors(client, alice, main_team):
    from openhive.engine.models import Session, ToolCall

    topic = Topic.objects.create(channel_id=f"ws:user:{alice.pk}", name="Teams")
    session = Session.objects.create(team=main_team, topic=topic, kind=Session.Kind.CHAT)
    ToolCall.objects.create(session=session, team_name="main", tool="list_teams", success=True)
    ToolCall.objects.create(
        session=session,
        team_name="main",
        tool="shutdown_team",
        success=False,
        error='team "nope" not found',
    )
    other = Session.objects.create(team=main_team, kind=Session.Kind.CHAT)
    ToolCall.objects.create(session=other, team_name="main", tool="get_status", success=True)
    events = client.get(f"/chat/topics/{topic.pk}/messages/").json()["events"]
    assert [(e["name"], e["success"], e["error"]) for e in events] == [
        ("list_teams", True, ""),
        ("shutdown_team", False, 'team "nope" not found'),
    ]
    assert all(e["created_at"] for e in events)

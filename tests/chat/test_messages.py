"""A chat answer stored in its topic, and an inbound message scrubbed again after its turn:
what is stored, and how few queries it takes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from openhive.chat.models import Message, Topic
from openhive.chat.services import message_record, message_rescrub, topic_open
from openhive.core import scrubbing
from openhive.core.db import statements_in_one_query

pytestmark = pytest.mark.django_db
CHANNEL = "ws:user:1"
SECRET = "s3cr3t-value-123456"


def question(topic: Topic, content: str = "how are the deploys?") -> Message:
    return Message.objects.create(
        topic=topic, channel_id=CHANNEL, sender_id="alice", role="user", content=content
    )


def knowing(*secrets: str) -> None:
    """The scrubber loaded now (no reload for a couple of seconds), knowing `secrets` too."""
    scrubbing.get_scrubber(refresh=True)
    scrubbing.remember(secrets)


@pytest.fixture
def topic() -> Topic:
    return topic_open(channel_id=CHANNEL, name="Deploys", now=timezone.now() - timedelta(hours=2))


def test_an_answer_is_stored_in_its_topic_which_it_marks_active(topic):
    asked = question(topic)
    idle_since = topic.last_activity_at
    answer = message_record(
        topic=topic, sender_id="main", role="assistant", content="All green.", in_reply_to=asked
    )
    stored = Message.objects.get(pk=answer.pk)
    assert (stored.topic_id, stored.channel_id, stored.sender_id, stored.role) == (
        topic.pk,
        CHANNEL,
        "main",
        "assistant",
    )
    assert (stored.content, stored.in_reply_to_id) == ("All green.", asked.pk)
    assert stored.created_at == answer.created_at
    topic.refresh_from_db()
    assert idle_since < topic.last_activity_at <= stored.created_at
    assert list(topic.messages.order_by("pk")) == [asked, answer]


def test_an_answer_without_a_question_is_stored_too(topic):
    answer = message_record(topic=topic, sender_id="ops", role="assistant", content="Deployed.")
    assert Message.objects.get(pk=answer.pk).in_reply_to_id is None


def test_an_answer_repeating_a_known_secret_is_stored_without_it(topic):
    knowing(SECRET)
    answer = message_record(
        topic=topic, sender_id="main", role="assistant", content=f"Your token is {SECRET}."
    )
    assert SECRET not in Message.objects.get(pk=answer.pk).content
    assert SECRET not in answer.content


def test_on_postgresql_an_answer_and_its_topic_activity_are_one_round_trip(
    topic, django_assert_num_queries
):
    if not statements_in_one_query():
        pytest.skip("PostgreSQL with client-side binding takes several statements in one query")
    knowing()
    with django_assert_num_queries(1):
        message_record(topic=topic, sender_id="main", role="assistant", content="All green.")


def test_rescrubbing_a_message_that_holds_no_new_secret_sends_no_query(
    topic, django_assert_num_queries
):
    asked = question(topic, "deploy with the usual settings")
    knowing(SECRET)
    with django_assert_num_queries(0):
        message_rescrub(message=asked)
    assert Message.objects.get(pk=asked.pk).content == "deploy with the usual settings"


def test_rescrubbing_removes_a_secret_the_turn_revealed(topic):
    asked = question(topic, f"deploy with the token {SECRET}")
    knowing(SECRET)  # the turn stored it in the vault
    message_rescrub(message=asked)
    stored = Message.objects.get(pk=asked.pk).content
    assert SECRET not in stored and stored.startswith("deploy with the token ")
    assert asked.content == stored


def test_rescrubbing_leaves_alone_a_message_changed_meanwhile(topic):
    asked = question(topic, f"deploy with the token {SECRET}")
    Message.objects.filter(pk=asked.pk).update(content="deploy on Friday")
    knowing(SECRET)
    message_rescrub(message=asked)
    assert Message.objects.get(pk=asked.pk).content == "deploy on Friday"

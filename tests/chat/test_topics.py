"""Topic routing as a service: 0 / 1 / 2+ active topics, the classifier through the scripted
provider, the cap of five, idling, and client-named topics."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from openhive.chat.classifier import classify_topic, parse_pick
from openhive.chat.jobs import idle_quiet_topics
from openhive.chat.models import Message, Topic
from openhive.chat.services import chat_route, topic_open
from openhive.chat.topics import (
    CLASSIFIED,
    CLASSIFIED_NEW,
    MAX_ACTIVE_TOPICS,
    NAMED,
    NEW,
    SINGLE,
    Pick,
)
from openhive.core.errors import NotFound
from openhive.engine.models import LlmExchange, Session

pytestmark = pytest.mark.django_db
CHANNEL = "ws:user:1"


def inbound(text: str, channel: str = CHANNEL) -> Message:
    return Message.objects.create(
        channel_id=channel, sender_id="alice", role="user", content=text, trust_decision="allowed"
    )


def never(**kwargs) -> Pick:
    raise AssertionError("the classifier must not be called here")


def opened(name: str, minutes_ago: float = 0, channel: str = CHANNEL) -> Topic:
    return topic_open(
        channel_id=channel, name=name, now=timezone.now() - timedelta(minutes=minutes_ago)
    )


def test_first_message_opens_a_topic_named_after_it_without_a_model(main_team):
    routed = chat_route(
        message=inbound("Deploy the new billing service"), topic_id=None, classify=never
    )
    assert routed.mode == NEW and routed.topics_changed
    assert routed.topic.name == "Deploy the new billing service"
    assert Message.objects.get().topic == routed.topic


def test_long_first_messages_give_a_short_name(main_team):
    routed = chat_route(message=inbound("word " * 40), topic_id=None, classify=never)
    assert len(routed.topic.name) <= 61 and routed.topic.name.endswith("…")


def test_one_active_topic_is_continued_and_left_to_the_turn(main_team):
    only = opened("Billing")
    routed = chat_route(message=inbound("and the invoices?"), topic_id=None, classify=never)
    assert (routed.topic, routed.mode, routed.topics_changed) == (only, SINGLE, False)


def test_two_active_topics_ask_the_classifier_through_litellm(main_team, scripted_provider):
    billing, _ = opened("Billing", 2), opened("Hiring", 1)
    scripted_provider(
        [
            {
                "when": {"team": "classifier"},
                "reply": {"content": f'```json\n{{"topic_id": {billing.pk}}}\n```'},
            }
        ]
    )
    message = inbound("invoice 42 bounced")
    routed = chat_route(message=message, topic_id=None, classify=classify_topic)
    assert (routed.topic, routed.mode) == (billing, CLASSIFIED)
    exchange = LlmExchange.objects.get()
    prompt = str(exchange.request_messages)
    assert "Billing" in prompt and "Hiring" in prompt and "invoice 42 bounced" in prompt
    assert (
        exchange.session.kind == Session.Kind.CHAT and exchange.session.stop_reason == "completed"
    )


def test_the_classifier_profile_is_preferred_when_defined(main_team, scripted_provider):
    opened("Billing", 2), opened("Hiring", 1)
    scripted_provider([{"when": {}, "reply": {"content": "not used"}}])
    scripted_provider(
        [{"when": {"team": "classifier"}, "reply": {"content": '{"new_topic": "Office move"}'}}],
        profile="classifier",
    )
    routed = chat_route(
        message=inbound("the movers come friday"), topic_id=None, classify=classify_topic
    )
    assert (routed.topic.name, routed.mode, routed.topics_changed) == (
        "Office move",
        CLASSIFIED_NEW,
        True,
    )
    assert LlmExchange.objects.get().session.provider_profile == "classifier"


@pytest.mark.parametrize("answer", ["no idea", '{"topic_id": 99999}', "[1]", '{"x": 1}'])
def test_unusable_classifier_answers_open_a_new_topic(main_team, scripted_provider, answer):
    opened("Billing", 2), opened("Hiring", 1)
    scripted_provider([{"when": {"team": "classifier"}, "reply": {"content": answer}}])
    routed = chat_route(message=inbound("something else"), topic_id=None, classify=classify_topic)
    assert routed.mode == CLASSIFIED_NEW and routed.topic.name == "something else"


def test_a_failing_classifier_opens_a_new_topic(main_team):
    opened("Billing", 2), opened("Hiring", 1)

    def broken(**kwargs):
        raise RuntimeError("provider down")

    routed = chat_route(message=inbound("hello"), topic_id=None, classify=broken)
    assert routed.mode == CLASSIFIED_NEW


def test_at_most_five_topics_stay_active_and_the_oldest_idles(main_team):
    topics = [opened(f"t{i}", minutes_ago=10 - i) for i in range(MAX_ACTIVE_TOPICS)]
    newest = opened("one more")
    active = set(Topic.objects.filter(state="active").values_list("name", flat=True))
    assert len(active) == MAX_ACTIVE_TOPICS and "t0" not in active and newest.name in active
    assert Topic.objects.get(pk=topics[0].pk).state == "idle"


def test_naming_an_idle_topic_reactivates_it_within_the_cap(main_team):
    oldest = opened("oldest", minutes_ago=30)
    for i in range(MAX_ACTIVE_TOPICS):
        opened(f"t{i}", minutes_ago=20 - i)
    assert Topic.objects.get(pk=oldest.pk).state == "idle"
    routed = chat_route(message=inbound("back to this"), topic_id=oldest.pk, classify=never)
    assert (routed.topic, routed.mode, routed.topics_changed) == (oldest, NAMED, True)
    assert Topic.objects.filter(state="active").count() == MAX_ACTIVE_TOPICS
    assert Topic.objects.get(name="t0").state == "idle"


def test_topic_ids_are_ids_of_the_callers_channel_not_names(main_team):
    foreign = opened("42", channel="ws:user:2")
    with pytest.raises(NotFound):
        chat_route(message=inbound("hi"), topic_id=foreign.pk, classify=never)
    with pytest.raises(NotFound):
        chat_route(message=inbound("hi"), topic_id=42_000, classify=never)


def test_quiet_topics_go_idle_after_the_configured_period(main_team, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "TOPIC_IDLE_MINUTES": 30}
    opened("stale", minutes_ago=45)
    fresh = opened("fresh", minutes_ago=5)
    routed = chat_route(message=inbound("more on this"), topic_id=None, classify=never)
    assert (routed.topic, routed.mode, routed.topics_changed) == (fresh, SINGLE, True)
    assert Topic.objects.get(name="stale").state == "idle"


def test_the_clock_job_idles_quiet_topics_of_every_channel(main_team, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "TOPIC_IDLE_MINUTES": 30}
    opened("a", minutes_ago=45), opened("b", minutes_ago=45, channel="ws:user:2"), opened("c")
    assert idle_quiet_topics(timezone.now()) == {"topics_idled_channels": 2}
    assert list(Topic.objects.filter(state="active").values_list("name", flat=True)) == ["c"]


@pytest.mark.parametrize(
    "text, pick",
    [
        ('{"topic_id": 3}', Pick(topic_id=3)),
        ('Sure! {"topic_id": "7"}', Pick(topic_id=7)),
        ('{"new_topic": "  Office   move "}', Pick(new_name="Office move")),
        ('{"topic_id": true}', Pick()),
        ("", Pick()),
    ],
)
def test_parse_pick(text, pick):
    assert parse_pick(text) == pick

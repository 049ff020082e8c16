"""Message and keyword triggers fed by real inbound chat messages (chat_receive), and the
notification contract of trigger results."""

from __future__ import annotations

import pytest

from openhive.chat.models import OutboxMessage
from openhive.chat.services import chat_route
from openhive.chat.signals import message_received
from openhive.chat.turn import Inbound, chat_receive
from tasks.models import Task
from tasks.services import task_finish
from tests.factories import claim
from triggers.models import TriggerConfig
from triggers.notify import trigger_notification
from trust.gate import Sender

pytestmark = pytest.mark.django_db


def trigger_tasks():
    return Task.objects.filter(type=Task.Type.TRIGGER)


def _no_classifier(*args, **kwargs):
    raise AssertionError("these tests keep one active topic per channel")


def receive(*, channel_id: str, sender_id: str, content: str) -> Inbound:
    """An inbound chat message the way the socket handles it: trust gate, then topic routing,
    which announces the admitted message to the triggers."""
    inbound = chat_receive(sender=Sender(channel_id, sender_id), content=content, topic_id=None)
    routed = chat_route(message=inbound.message, topic_id=None, classify=_no_classifier)
    inbound.topic = routed.topic
    return inbound


def test_keyword_trigger_fires_once_from_a_chat_message(make_trigger):
    make_trigger(name="deploys", type="keyword", config={"keywords": ["deploy"]})
    inbound = receive(channel_id="ws:alice", sender_id="alice", content="Please Deploy the api")
    task = trigger_tasks().get()
    assert task.source_channel == "ws:alice" and task.topic_id == inbound.topic.pk
    assert "Please Deploy the api" in task.text
    # The same stored message announced again (a retry, a second receiver) fires nothing new.
    message_received.send(
        sender=type(inbound.message),
        message=inbound.message,
        topic=inbound.topic,
        channel_id="ws:alice",
        sender_id="alice",
    )
    assert trigger_tasks().count() == 1


def test_identical_text_in_a_new_message_fires_again(make_trigger):
    make_trigger(
        name="deploys", type="keyword", config={"keywords": ["deploy"]}, overlap_policy="allow"
    )
    for _ in range(2):
        receive(channel_id="ws:a", sender_id="a", content="deploy")
    assert trigger_tasks().count() == 2


def test_messages_that_do_not_match_fire_nothing(make_trigger):
    make_trigger(name="deploys", type="keyword", config={"keywords": ["deploy"]})
    make_trigger(name="ops-chan", type="message", config={"channel": "ws:ops"})
    receive(channel_id="ws:bob", sender_id="bob", content="redeployment plans")
    assert trigger_tasks().count() == 0
    receive(channel_id="ws:ops", sender_id="bob", content="hello")
    assert list(trigger_tasks().values_list("options__trigger", flat=True)) == ["ops-chan"]


def test_an_invalid_message_trigger_is_disabled_and_chat_keeps_working(make_trigger):
    broken = make_trigger(name="broken", type="keyword", config={"regex": "ok"})
    TriggerConfig.objects.filter(pk=broken.pk).update(config={"regex": "(unclosed"})
    inbound = receive(channel_id="ws:a", sender_id="a", content="anything")
    assert inbound.message.pk is not None
    broken.refresh_from_db()
    assert broken.state == TriggerConfig.State.DISABLED and "regex" in broken.disabled_reason


@pytest.mark.parametrize(
    ("trigger_type", "status", "result", "expected"),
    [
        ("schedule", "done", "Nightly review done.", None),
        ("schedule", "done", 'All good.\n```json:notify {"notify": true}```', "All good."),
        ("keyword", "done", "Deployed v2.", "Deployed v2."),
        ("keyword", "done", 'Handled.\n```json:notify {"notify": false}```', None),
        ("window", "done", '{"action": "noop", "reason": "no news"}', None),
        ("window", "done", 'Breaking news!\n```json:notify {"notify": true}```', "Breaking news!"),
        ("message", "done", 'Nothing to add {"action": "noop", "reason": "dup"}', None),
        ("schedule", "failed", "Error: boom", None),
    ],
)
def test_trigger_results_notify_only_when_the_run_asks(trigger_type, status, result, expected):
    assert trigger_notification(trigger_type=trigger_type, status=status, result=result) == expected


def test_a_finished_trigger_run_reaches_the_chat_only_when_it_asks(make_trigger):
    from triggers.services import trigger_fire

    quiet = make_trigger(name="quiet")
    loud = make_trigger(name="loud")
    for trigger, result in (
        (quiet, "Checked; nothing to say."),
        (loud, 'Disk 91% full!\n```json:notify {"notify": true}```'),
    ):
        fired = trigger_fire(trigger_id=trigger.pk, event_key="k", source_channel="ws:op")
        claim(task_id=fired.task_id, worker="w")
        task_finish(task_id=fired.task_id, worker="w", status="done", result=result)
    assert list(OutboxMessage.objects.values_list("content", flat=True)) == ["[ops] Disk 91% full!"]

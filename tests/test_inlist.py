"""`any_of`: a column matched against many values through one query parameter."""

import pytest

from openhive.chat.models import Message, OutboxMessage
from openhive.core.inlist import any_of

pytestmark = pytest.mark.django_db


def test_text_values_match_as_an_in_list_would():
    for channel in ("ws:user:1", "ws:user:2", "ws:user:3"):
        OutboxMessage.objects.create(channel_id=channel, content="x")
    wanted = ["ws:user:2", "ws:user:3", "ws:user:9", 'it\'s "quoted"']
    found = OutboxMessage.objects.filter(channel_id__in=any_of(wanted))
    assert sorted(found.values_list("channel_id", flat=True)) == ["ws:user:2", "ws:user:3"]


def test_integer_values_and_no_values():
    first = Message.objects.create(channel_id="c", sender_id="s", role="user", content="a")
    Message.objects.create(channel_id="c", sender_id="s", role="user", content="b")
    rows = Message.objects.filter(pk__in=any_of([first.pk, 10**12], of="bigint"))
    assert list(rows.values_list("content", flat=True)) == ["a"]
    assert not Message.objects.filter(pk__in=any_of([], of="bigint")).exists()
    assert not OutboxMessage.objects.filter(channel_id__in=any_of([])).exists()


def test_a_type_it_cannot_send_is_refused_before_any_query():
    with pytest.raises(ValueError, match="text or bigint"):
        any_of(["x"], of="text; DROP TABLE x")

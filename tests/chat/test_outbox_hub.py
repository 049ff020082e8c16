"""One outbox poller per process: one query per poll whatever the number of sockets, and only
the sockets whose conversation has something undelivered are woken."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from openhive.chat import dbpool
from openhive.chat.models import OutboxMessage
from openhive.chat.outbox_hub import OutboxHub
from openhive.chat.selectors import outbox_pending_channels

pytestmark = pytest.mark.django_db(transaction=True)


class FakeSocket:
    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id
        self.woken = 0

    async def deliver_outbox(self) -> None:
        self.woken += 1


@pytest.fixture(autouse=True)
async def close_pool_connections():
    yield
    await sync_to_async(dbpool.close_db_connections)()


async def test_only_sockets_with_undelivered_rows_are_woken():
    hub = OutboxHub()
    sockets = [FakeSocket(f"ws:user:{i}") for i in range(300)]
    for s in sockets:
        hub.sockets.setdefault(s.channel_id, set()).add(s)  # registered without the poll loop
    await OutboxMessage.objects.acreate(channel_id="ws:user:7", content="done")
    await OutboxMessage.objects.acreate(channel_id="ws:user:nobody-online", content="later")
    assert await hub.poll_once() == 1
    assert [s.channel_id for s in sockets if s.woken] == ["ws:user:7"]


def test_pending_channels_of_a_thousand_sockets_cost_one_query_with_one_parameter():
    OutboxMessage.objects.create(channel_id="ws:user:3", content="x")
    OutboxMessage.objects.create(
        channel_id="ws:user:3", content="y", delivered_at="2026-01-01T00:00Z"
    )
    channels = [f"ws:user:{i}" for i in range(1000)]
    sent: list[tuple] = []

    def record(execute, sql, params, many, context):
        sent.append(tuple(params))
        return execute(sql, params, many, context)

    # The channels travel as one value, not a placeholder each: compiling 500 placeholders held
    # the GIL through a chat burst, and older SQLite builds refuse more than 999.
    with connection.execute_wrapper(record):
        assert outbox_pending_channels(channel_ids=channels) == {"ws:user:3"}
    (params,) = sent
    assert len(params) == 1

"""The in-memory channel layer (a web process without Redis) sweeps expired messages once per
second, not on every receive and group send: with many sockets, the sweep walked all of them
for every topic change and every wake-up."""

from __future__ import annotations

import asyncio

import channels.layers
import pytest
from channels.layers import get_channel_layer

from openhive.chat import layers
from openhive.chat.layers import SWEEP_SECONDS, InMemoryChannelLayer


class FakeClock:
    """Both clocks the layer reads: wall time (Channels' message expiry) and monotonic time
    (the sweep's interval)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(channels.layers, "time", fake)
    monkeypatch.setattr(layers, "time", fake)
    return fake


def _queued(layer: InMemoryChannelLayer, channel: str) -> int:
    queue = layer.channels.get(channel)
    return 0 if queue is None else queue.qsize()


def test_an_unread_message_past_its_expiry_is_dropped_by_the_next_sweep(clock):
    async def scenario() -> tuple[int, int]:
        layer = InMemoryChannelLayer(expiry=60)
        await layer.group_add("topics", "reader.one")
        await layer.group_send("topics", {"type": "first"})  # sweeps: nothing is old yet
        kept = _queued(layer, "reader.one")
        clock.advance(61)
        await layer.group_send("other", {"type": "nudge"})  # a second later: sweeps again
        return kept, _queued(layer, "reader.one")

    kept, after = asyncio.run(scenario())
    assert (kept, after) == (1, 0)


def test_sends_within_a_second_of_the_last_sweep_do_not_walk_every_channel(clock, monkeypatch):
    walks: list[float] = []
    walk = channels.layers.InMemoryChannelLayer._clean_expired

    def counted(self) -> None:
        walks.append(clock.now)
        walk(self)

    monkeypatch.setattr(channels.layers.InMemoryChannelLayer, "_clean_expired", counted)

    async def scenario() -> None:
        layer = InMemoryChannelLayer()
        for number in range(200):
            await layer.group_add(f"user.{number}", f"socket.{number}")
        for number in range(200):  # a notice to every socket, within the same instant
            await layer.group_send(f"user.{number}", {"type": "outbox.wake"})
        assert all(_queued(layer, f"socket.{number}") == 1 for number in range(200))
        clock.advance(SWEEP_SECONDS)
        await layer.group_send("user.0", {"type": "outbox.wake"})

    asyncio.run(scenario())
    assert len(walks) == 2


def test_a_waiting_socket_still_gets_what_is_sent_to_its_group(clock):
    async def scenario() -> dict:
        layer = InMemoryChannelLayer()
        channel = await layer.new_channel()
        await layer.group_add("ws.user.7", channel)
        waiting = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(0)
        await layer.group_send("ws.user.7", {"type": "topics.changed"})
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(scenario()) == {"type": "topics.changed"}


def test_a_web_process_without_redis_uses_this_layer(settings):
    if "openhive.chat.layers" not in settings.CHANNEL_LAYERS["default"]["BACKEND"]:
        pytest.skip("this run configures Redis (REDIS_URL)")
    assert isinstance(get_channel_layer(), InMemoryChannelLayer)

"""The chat consumer's own message loop (`DirectDispatch`): the socket and the channel layer
both reach their handlers, one handler at a time, and a failing handler ends the consumer as
it does in Channels."""

from __future__ import annotations

import asyncio

import pytest
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from openhive.chat.dispatch import DirectDispatch


class Recorder(DirectDispatch, AsyncJsonWebsocketConsumer):
    """Echoes frames after a pause, answers `note` layer messages, fails on `broken`."""

    running = 0
    overlaps = 0

    async def connect(self) -> None:
        await self.accept()
        await self.channel_layer.group_add("recorders", self.channel_name)

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard("recorders", self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        await self._handled(content["text"])

    async def note(self, event: dict) -> None:
        await self._handled(event["text"])

    async def broken(self, event: dict) -> None:
        raise RuntimeError("a layer handler failed")

    async def _handled(self, text: str) -> None:
        type(self).running += 1
        type(self).overlaps += type(self).running > 1
        await asyncio.sleep(0.01)  # a handler that awaits: another must not start meanwhile
        type(self).running -= 1
        await self.send_json({"text": text})


async def _received(communicator: WebsocketCommunicator, count: int) -> list[str]:
    return [(await communicator.receive_json_from(timeout=2))["text"] for _ in range(count)]


async def test_frames_and_layer_messages_reach_their_handlers_one_at_a_time() -> None:
    Recorder.overlaps = 0
    communicator = WebsocketCommunicator(Recorder.as_asgi(), "/ws/test/")
    connected, _ = await communicator.connect()
    assert connected
    layer = get_channel_layer()
    for number in range(3):
        await communicator.send_json_to({"text": f"frame {number}"})
        await layer.group_send("recorders", {"type": "note", "text": f"note {number}"})
    answers = await _received(communicator, 6)
    assert sorted(answers) == sorted(
        [f"frame {n}" for n in range(3)] + [f"note {n}" for n in range(3)]
    )
    assert [a for a in answers if a.startswith("frame")] == ["frame 0", "frame 1", "frame 2"]
    assert Recorder.overlaps == 0
    await communicator.disconnect()


async def test_a_failing_layer_handler_ends_the_consumer_with_its_error() -> None:
    communicator = WebsocketCommunicator(Recorder.as_asgi(), "/ws/test/")
    connected, _ = await communicator.connect()
    assert connected
    await get_channel_layer().group_send("recorders", {"type": "broken"})
    # It ends by itself (the socket sent nothing), not once someone gives up on it.
    done, _ = await asyncio.wait([communicator.future], timeout=2)
    assert done
    with pytest.raises(RuntimeError, match="a layer handler failed"):
        communicator.future.result()


async def test_the_socket_closing_ends_the_consumer_and_its_layer_reader() -> None:
    communicator = WebsocketCommunicator(Recorder.as_asgi(), "/ws/test/")
    connected, _ = await communicator.connect()
    assert connected
    before = {t for t in asyncio.all_tasks() if not t.done()}
    await communicator.disconnect()
    await asyncio.sleep(0.05)
    assert communicator.future.done() and communicator.future.exception() is None
    leftover = {t for t in asyncio.all_tasks() if not t.done()} - before
    assert leftover == set()
    assert not any("_from_layer" in repr(t) for t in asyncio.all_tasks())

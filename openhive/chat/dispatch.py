"""How the chat socket's consumer takes its messages: Channels' own loop, made cheaper per frame.

Channels' `AsyncConsumer` waits on the socket and on the channel layer with `asyncio.wait` and a
new task for every message, and closes old connections on its one shared sync thread before
every handler. For consumers that touch the database only on threads of their own (dbpool),
`DirectDispatch` reads the socket in the consumer's own task and the channel layer in a second,
and runs their handlers one at a time, as Channels does."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.layers import get_channel_layer


class DirectDispatch:
    """A mixin for an `AsyncConsumer`. Per frame this skips a task, an `asyncio.wait` and a
    round trip to the shared sync thread (`aclose_old_connections`): that round trip queued a
    burst of 500 messages through that thread one by one, and the wait and the task cost ~9 us
    a frame (a 500-socket burst's echo ack p99, old and new alternated: 37.0/36.4/33.3 ->
    33.3/29.7/34.6 ms; medians of 5 bursts 40.7/41.7 -> 34.1/34.9 ms,
    benchmarks/chat_sockets.py)."""

    channel_layer_alias: str

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        self.scope = scope
        self.base_send = send
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        # One handler at a time, whichever source its message came from (as in Channels).
        self.handling = asyncio.Lock()
        layer: asyncio.Task | None = None
        if self.channel_layer is not None:
            self.channel_name = await self.channel_layer.new_channel()
            self.channel_receive = functools.partial(self.channel_layer.receive, self.channel_name)
            layer = asyncio.ensure_future(self._from_layer())
            # A layer message's handler that fails ends the consumer, as in Channels.
            layer.add_done_callback(functools.partial(_stop_reading, asyncio.current_task()))
        try:
            while True:
                message = await receive()
                async with self.handling:
                    await self.dispatch(message)
        except StopConsumer:
            pass
        except asyncio.CancelledError:
            failure = _failure_of(layer)
            if failure is None:
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # our own cancel, to stop reading: not the caller's
            if not isinstance(failure, StopConsumer):
                raise failure from None
        finally:
            if layer is not None and not layer.done():
                layer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await layer

    async def _from_layer(self) -> None:
        while True:
            message = await self.channel_receive()
            async with self.handling:
                await self.dispatch(message)

    async def dispatch(self, message: dict) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


def _failure_of(task: asyncio.Task | None) -> BaseException | None:
    if task is None or not task.done() or task.cancelled():
        return None
    return task.exception()


def _stop_reading(reader: asyncio.Task | None, layer: asyncio.Task) -> None:
    if reader is not None and _failure_of(layer) is not None and not reader.done():
        reader.cancel()

"""One outbox poller per process (per event loop) for all of its chat sockets.

A poll per socket costs one query per socket per interval: at 500 sockets and 0.3 s that is
~1,700 queries a second doing nothing. The hub asks once per interval which of the connected
channels have undelivered rows and wakes only those sockets. The channel-layer push stays the
fast path; the poll is what makes a lost push (or no Redis) only a delay."""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Protocol

from django.conf import settings

from .dbpool import db
from .selectors import outbox_pending_channels

logger = logging.getLogger(__name__)


class OutboxSocket(Protocol):
    channel_id: str

    async def deliver_outbox(self) -> None: ...


class OutboxHub:
    def __init__(self) -> None:
        self.sockets: dict[str, set[OutboxSocket]] = {}
        self.task: asyncio.Task | None = None

    def register(self, socket: OutboxSocket) -> None:
        self.sockets.setdefault(socket.channel_id, set()).add(socket)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def unregister(self, socket: OutboxSocket) -> None:
        group = self.sockets.get(socket.channel_id)
        if group is not None:
            group.discard(socket)
            if not group:
                del self.sockets[socket.channel_id]
        if not self.sockets and self.task is not None:
            self.task.cancel()
            self.task = None

    async def poll_once(self) -> int:
        """Wake the sockets of every channel with undelivered rows; returns how many."""
        channels = list(self.sockets)
        if not channels:
            return 0
        pending = await db(outbox_pending_channels)(channel_ids=channels)
        woken = [s for ch in pending for s in list(self.sockets.get(ch, ()))]
        await asyncio.gather(*(s.deliver_outbox() for s in woken), return_exceptions=True)
        return len(woken)

    async def _run(self) -> None:
        interval = settings.OPENHIVE["OUTBOX_POLL_SECONDS"]
        while True:
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("outbox poll failed; retrying")
            await asyncio.sleep(interval)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OutboxHub] = weakref.WeakKeyDictionary()


def outbox_hub() -> OutboxHub:
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        hub = _hubs[loop] = OutboxHub()
    return hub

"""The channel layer of a web process without Redis: Channels' in-memory layer, with its
expiry sweep run at most once per SWEEP_SECONDS instead of on every receive and group send.

Channels' sweep walks every channel queue and every group membership in the process. It runs
when a socket starts waiting for its next event and on every group send, so with N sockets
connected each topic change, wake-up or reply cost O(N) before it was delivered (0.4 ms at
500 sockets, profiled in benchmarks/chat_sockets.py), and a notice to every socket O(N²).
Expiry only drops messages nobody read for `expiry` seconds (60 by default) and memberships
older than a day: doing it once a second changes when that happens by at most a second."""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer as ChannelsInMemoryLayer

SWEEP_SECONDS = 1.0


class InMemoryChannelLayer(ChannelsInMemoryLayer):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._swept_at = float("-inf")

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._swept_at < SWEEP_SECONDS:
            return
        self._swept_at = now
        super()._clean_expired()

"""The in-memory channel layer (a web process without Redis) with N sockets connected: what a
group send (a topic change, an outbox wake-up) costs, OpenHive's layer against Channels' own
in the same run. Channels' layer walks every socket's queue and membership on each send.

    uv run python benchmarks/channel_layer.py [--sockets 100 500 2000] [--sends 2000]

Each socket waits on its channel (as a connected consumer does) and is in its own group; the
sends go round the groups, so every socket is woken. Prints microseconds per group send and
the ratio; goal: the cost does not grow with the number of sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")


async def per_send(layer_class: type, sockets: int, sends: int) -> float:
    layer = layer_class()
    names = [await layer.new_channel() for _ in range(sockets)]
    for number, name in enumerate(names):
        await layer.group_add(f"user.{number}", name)
    waiting = [asyncio.ensure_future(layer.receive(name)) for name in names]
    await asyncio.sleep(0)
    started = time.perf_counter()
    for number in range(sends):
        await layer.group_send(f"user.{number % sockets}", {"type": "outbox.wake"})
        if number % sockets == sockets - 1:
            await asyncio.sleep(0)  # the woken sockets read, and wait again
            for index, task in enumerate(waiting):
                if task.done():
                    waiting[index] = asyncio.ensure_future(layer.receive(names[index]))
    elapsed = time.perf_counter() - started
    for task in waiting:
        task.cancel()
    return elapsed / sends * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--sends", type=int, default=2000)
    args = parser.parse_args()
    from channels.layers import InMemoryChannelLayer as ChannelsLayer

    from openhive.chat.layers import InMemoryChannelLayer

    print("group send with N sockets waiting, microseconds each (median of 3)")
    first = None
    for sockets in args.sockets:
        figures = {}
        for name, layer_class in (("channels", ChannelsLayer), ("openhive", InMemoryChannelLayer)):
            runs = sorted(asyncio.run(per_send(layer_class, sockets, args.sends)) for _ in range(3))
            figures[name] = runs[1]
        first = first or figures["openhive"]
        print(
            f"{sockets:>6} sockets: Channels' layer {figures['channels']:8.1f} us, OpenHive's "
            f"{figures['openhive']:6.1f} us ({figures['channels'] / figures['openhive']:.1f}x "
            f"less); against {args.sockets[0]} sockets: {figures['openhive'] / first:.2f}x"
        )


if __name__ == "__main__":
    main()

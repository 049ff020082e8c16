"""Process-level helpers of benchmarks/chat_sockets.py: the web process's (and its turn
host's) RSS and CPU time, and the burst run from several client processes at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _burst_child(
    open_all: Callable, url: str, origin: str, users: list, messages: int, barrier, conn
) -> None:
    async def go() -> list[float]:
        clients = await open_all(url, origin, users)
        await asyncio.get_running_loop().run_in_executor(None, barrier.wait, 300)
        acks: list[float] = []
        await asyncio.gather(*(c.chat(messages, acks) for c in clients))
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        return acks

    conn.send(asyncio.run(go()))


def burst_spread(
    open_all: Callable, url: str, origin: str, users: list, messages: int, procs: int
) -> dict:
    """The burst with its sockets spread over `procs` client processes that start sending
    together (a barrier): whether one client process on the same cores is itself the
    bottleneck of the single-process figure."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(procs)
    pipes, children = [], []
    for i in range(procs):
        ours, theirs = ctx.Pipe(duplex=False)
        child = ctx.Process(
            target=_burst_child,
            args=(open_all, url, origin, users[i::procs], messages, barrier, theirs),
        )
        child.start()
        pipes.append(ours)
        children.append(child)
    acks = [a for pipe in pipes for a in pipe.recv()]
    for child in children:
        child.join()
    return {"ack_p50": _pct(acks, 50), "ack_p99": _pct(acks, 99), "ack_max": max(acks)}


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(pid: int) -> dict[str, float]:
    """CPU seconds used so far by the web process and its turn host: per message, a figure
    that a loaded machine slows down far less than it does wall-clock latency."""
    figures = {"web": _cpu_s(pid)}
    for child in _children(pid):
        with contextlib.suppress(OSError):
            if b"turnhost" in Path(f"/proc/{child}/cmdline").read_bytes():
                figures["turn host"] = _cpu_s(child)
    return figures


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def memory(daphne_pid: int) -> dict[str, float]:
    figures = {"web": _rss_mb(daphne_pid)}
    for child in _children(daphne_pid):
        with contextlib.suppress(OSError):
            if b"turnhost" in Path(f"/proc/{child}/cmdline").read_bytes():
                figures["turn host"] = _rss_mb(child)
    return figures

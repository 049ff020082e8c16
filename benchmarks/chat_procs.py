"""Process-level helpers of benchmarks/chat_sockets.py: the web process started as serve
starts it, its (and its turn host's) RSS, CPU time and full garbage collections, and the burst
run from several client processes at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], p: float) -> float:
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
    return {"ack_p50": pct(acks, 50), "ack_p99": pct(acks, 99), "ack_max": max(acks)}


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


def memory(web_pid: int) -> dict[str, float]:
    figures = {"web": _rss_mb(web_pid)}
    for child in _children(web_pid):
        with contextlib.suppress(OSError):
            if b"turnhost" in Path(f"/proc/{child}/cmdline").read_bytes():
                figures["turn host"] = _rss_mb(child)
    return figures


def start_web(data_dir: Path, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "OPENHIVE_DATA_DIR": str(data_dir),
        "OPENHIVE_PRELOAD_LLM": "now",
        "BENCH_GC_LOG": str(data_dir / "gc.json"),
    }
    env.setdefault("OPENHIVE_LOG_LEVEL", "WARNING")
    process = subprocess.Popen(
        [
            sys.executable,
            # BENCH_PROFILE=<file>: the web process's main thread (its event loop) under cProfile.
            *(
                ["-m", "cProfile", "-o", os.environ["BENCH_PROFILE"]]
                if "BENCH_PROFILE" in os.environ
                else []
            ),
            "-m",
            "openhive.webserver",  # as serve runs it
            "127.0.0.1",
            str(port),
            "benchmarks.chat_echo_asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    import httpx

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the web server did not start")


def collections_seen(path: Path) -> list[tuple[float, int, float]]:
    """The web process's garbage collections so far (chat_echo_asgi.py): (wall-clock start,
    generation, pause in ms) each."""
    try:
        return [tuple(c) for c in json.loads(path.read_text())]
    except (OSError, ValueError):
        return []


def collections_within(path: Path, start: float, end: float) -> str:
    """The web process's collections that began between two wall-clock moments: each pauses
    every ack pending meanwhile."""
    inside = [c for c in collections_seen(path) if start <= c[0] <= end]
    young = [ms for _at, generation, ms in inside if generation < 2]
    full = [ms for _at, generation, ms in inside if generation == 2]
    return (
        f"{len(young)} young or middle ({sum(young):.1f} ms), {len(full)} full ({sum(full):.1f} ms)"
    )


def full_collections(path: Path) -> str:
    """The web process's garbage collections over the whole run (chat_echo_asgi.py)."""
    seen = collections_seen(path)
    if not seen:
        return "web process collections: none recorded"
    full = [ms for _at, generation, ms in seen if generation == 2]
    young = [ms for _at, generation, ms in seen if generation < 2]
    return (
        f"web process full collections: {len(full)}, longest {max(full, default=0):.1f} ms "
        f"(each delays every ack pending meanwhile; openhive.core.heap keeps the objects "
        f"loaded at start-up out of them); young and middle: {len(young)}, longest "
        f"{max(young, default=0):.1f} ms, {sum(young):.1f} ms in all (counted to the last "
        "half second)"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(data_dir: Path, users: int) -> list[tuple[str, str]]:
    """Migrate, configure a zero-latency scripted provider and an allow policy, create users
    with API tokens. Returns (channel_id, token) per user."""
    os.environ["OPENHIVE_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from teams.services import team_ensure_main
    from trust.services import api_token_create

    call_command("migrate", interactive=False, verbosity=0)
    team_ensure_main()
    config = data_dir / "config"
    config.mkdir(parents=True, exist_ok=True)
    (data_dir / "scripts").mkdir(exist_ok=True)
    (data_dir / "scripts" / "bench.yaml").write_text(
        "rules:\n  - when: {}\n    reply: {content: ok, delay_ms: 0}\n"
    )
    (config / "providers.yaml").write_text("profiles:\n  default: {model: scripted/bench.yaml}\n")
    # The gate runs its full order: no denylist hit, no grant, allowlist miss, channel policy.
    (config / "channels.yaml").write_text(
        "trust:\n  default_policy: deny\n  channels:\n    ws: {policy: allow}\n"
    )
    User = get_user_model()
    have = User.objects.filter(username__startswith="bench-").count()
    User.objects.bulk_create(
        [User(username=f"bench-{i}") for i in range(have, users)], batch_size=500
    )
    out = []
    for user in User.objects.filter(username__startswith="bench-").order_by("pk")[:users]:
        out.append((f"ws:user:{user.pk}", api_token_create(username=user.username)[1]))
    return out

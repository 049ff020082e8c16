"""The floor under benchmarks/chat_sockets.py's burst goal (500 sockets send at once, ack p99
<= 50 ms): the same client against the leanest Python WebSocket server there is -- the
`websockets` library's own asyncio server, no ASGI, no Channels, no database -- answering each
message with an `ack` and a `response`, in a process of its own on the same cores.

    uv run python benchmarks/chat_floor.py [--sockets 500] [--runs 3] [--client-loop uvloop]

The server runs as the web process does: on uvloop, declining compression.

Whatever this prints is what no Python web stack on this machine can beat with this client:
the web server + Channels (what `serve` runs) adds its own per-message cost on top, and the chat
socket adds the trust gate and the stored message. chat_sockets.py prints those two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ACK = json.dumps({"type": "ack", "message_id": 0})
RESPONSE = json.dumps({"type": "response", "content": "echo"})


async def answer(peer) -> None:
    await peer.send(json.dumps({"type": "topic_list", "topics": []}))
    async for frame in peer:
        json.loads(frame)
        await peer.send(ACK)
        await peer.send(RESPONSE)


async def serve(port: int) -> None:
    from websockets.asyncio.server import serve as websocket_server

    # Without compression, as the web process declines it (openhive.webserver).
    async with websocket_server(answer, "127.0.0.1", port, max_queue=None, compression=None):
        await asyncio.Future()


def start_server(port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], start_new_session=True
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process
        except OSError:
            time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    raise SystemExit("the floor server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=2, help="messages per socket")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client-loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    if args.serve:
        import uvloop  # as the web process runs (openhive.webserver)

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        asyncio.run(serve(args.serve))
        return
    from benchmarks import chat_procs, chat_sockets

    chat_sockets.use_client_loop(args.client_loop)

    port = chat_procs.free_port()
    server = start_server(port)
    chat_sockets.SERVER_PID = server.pid
    users = [(f"ws:user:{number}", "") for number in range(args.sockets)]
    url = f"ws://127.0.0.1:{port}/"
    print(
        f"bare `websockets` server (no ASGI, on uvloop), {args.sockets} sockets each sending "
        f"{args.messages} messages, the first all at once; client on {args.client_loop}; load "
        f"average {os.getloadavg()[0]:.1f}"
    )
    try:
        p99s = []
        for number in range(args.runs):
            result = asyncio.run(
                chat_sockets.run_level(
                    url, url, users, args.messages, 20, fan=False, paced_run=False
                )
            )
            p99s.append(result["ack_p99"])
            cpu = result["acked_cpu_ms"]["web"]
            print(
                f"run {number + 1}: ack p50 {result['ack_p50']:.1f} ms, p99 "
                f"{result['ack_p99']:.1f} ms; server CPU {cpu:.2f} ms a message until the "
                f"last first-round ack"
            )
        p99s.sort()
        print(
            f"floor: median ack p99 {p99s[len(p99s) // 2]:.1f} ms (goal for OpenHive's chat "
            f"socket <= 50 ms; range {p99s[0]:.1f}-{p99s[-1]:.1f} ms)"
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()

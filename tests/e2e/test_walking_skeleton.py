"""Chat → main agent → spawned team → task on a worker → result back in chat, through the real
process group, a real WebSocket client and the offline demo script."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx
import pytest
import websockets

from .conftest import Server

pytestmark = pytest.mark.e2e
WAIT = 60  # seconds for one expected message; a cold worker may still be importing litellm


async def _next(ws, wanted: str, seen: list[dict]) -> dict:
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), WAIT))
        seen.append(message)
        if message["type"] == "error":
            raise AssertionError(f"server sent an error: {message}")
        if message["type"] == wanted:
            return message


async def _conversation(server: Server) -> list[dict]:
    seen: list[dict] = []
    url = f"{server.ws_url}?token={server.token}"
    async with websockets.connect(url, origin=server.origin) as ws:
        await _next(ws, "topic_list", seen)
        await ws.send(json.dumps({"type": "message", "content": "spawn a team called ops"}))
        ack = await _next(ws, "ack", seen)
        assert isinstance(ack["message_id"], int)
        response = await _next(ws, "response", seen)
        assert "being set up" in response["content"]
        ready = await _next(ws, "notification", seen)
        # The team is named once, in `team`: the content carries no "[ops]" tag.
        assert ready["content"] == "Team bootstrapped and ready."
        assert ready["team"] == "ops"

        await ws.send(json.dumps({"type": "message", "content": "ask ops to check the disks"}))
        await _next(ws, "ack", seen)
        response = await _next(ws, "response", seen)
        assert "asked the ops team" in response["content"]
        result = await _next(ws, "notification", seen)
        assert result["content"] == "All build servers are below 70% disk usage; nothing to do."
        assert result["kind"] == "result" and result["task_status"] == "done"
    return seen


def test_chat_spawns_a_team_and_gets_a_task_result_from_a_worker(serve: Server) -> None:
    seen = asyncio.run(_conversation(serve))
    # The main agent's turns ran in the chat turn host beside the web server, not in it.
    web = _descendants(serve.process.pid, "openhive.webserver")
    assert len(web) == 1
    assert len(_descendants(web[0], "openhive.chat.turnhost")) == 1
    events = [m for m in seen if m["type"] == "event"]
    assert {"event": "tool_call", "name": "spawn_team"}.items() <= events[0].items()

    headers = {"Authorization": f"Bearer {serve.token}"}
    tasks = httpx.get(f"{serve.base_url}/api/v1/tasks", headers=headers, timeout=10).json()
    rows = tasks["items"] if isinstance(tasks, dict) else tasks
    by_type = {row["type"]: row for row in rows}
    assert by_type["bootstrap"]["status"] == "done"
    assert by_type["delegate"]["status"] == "done"
    assert "below 70%" in by_type["delegate"]["result"]
    # The access log goes through logging and masks credentials in query strings.
    log = serve.log()
    assert '"WS /ws/chat/?token=***" 101' in log
    assert serve.token not in log


def test_sigterm_stops_the_whole_process_group(serve: Server) -> None:
    serve.process.send_signal(signal.SIGTERM)
    assert serve.process.wait(timeout=30) == 0
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{serve.base_url}/api/v1/health", timeout=1)


def test_chat_without_a_token_is_refused(serve: Server) -> None:
    async def attempt() -> list[dict]:
        received = []
        async with websockets.connect(serve.ws_url, origin=serve.origin) as ws:
            try:
                while True:
                    received.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
            except websockets.ConnectionClosed:
                return received

    assert asyncio.run(attempt()) == [
        {
            "type": "error",
            "code": "not_authorized",
            "message": "Not authorized. Log in, or connect with ?token=<API token>.",
        }
    ]


def _descendants(root: int, marker: str) -> list[int]:
    """Processes below `root` whose command line names `marker`."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def below(pid: int) -> bool:
        while pid in parents and pid != root:
            pid = parents[pid]
        return pid == root

    return [
        pid
        for pid, cmd in commands.items()
        if pid != root and marker.encode() in cmd and below(pid)
    ]

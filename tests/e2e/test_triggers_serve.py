"""Triggers in the real `serve` process group: a window trigger with a 2 s tick runs sessions on
the django-q2 workers while its window is open and stops at max_ticks_per_window; a keyword
trigger fires once from a chat message and its answer comes back to that chat."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import httpx
import pytest
import websockets
import yaml

from .conftest import Server

pytestmark = pytest.mark.e2e
WAIT = 60

SCRIPT = {
    "rules": [
        {
            "when": {"team": "main", "last": "user", "matches": "(?i)spawn .*ops"},
            "reply": {
                "tool_calls": [
                    {
                        "name": "spawn_team",
                        "arguments": {
                            "name": "ops",
                            "description": "Ops",
                            "scope_accepts": ["ops"],
                        },
                    }
                ]
            },
        },
        {"when": {"team": "main", "last": "tool"}, "reply": {"content": "Setting up ops."}},
        {"when": {"team": "main"}, "reply": {"content": "Noted."}},
        {"when": {"team": "ops", "matches": "^Bootstrap"}, "reply": {"content": "Ready."}},
        {
            "when": {"team": "ops", "matches": "Window tick"},
            "reply": {
                "content": '{"action": "noop", "reason": "nothing new"}',
                "delay_ms": 200,
                "usage": {"prompt_tokens": 50, "completion_tokens": 5},
            },
        },
        {
            "when": {"team": "ops", "matches": "(?i)fire drill"},
            "reply": {"content": "Fire drill acknowledged: exits checked."},
        },
        {"when": {}, "reply": {"content": "ok"}},
    ]
}


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Server:
    # `init --demo` keeps an existing demo script, so the team runs on this one.
    scripts = tmp_path / "data" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "demo.yaml").write_text(yaml.safe_dump(SCRIPT))
    return request.getfixturevalue("serve")


async def _until(ws, wanted: str, predicate=lambda m: True) -> dict:
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), WAIT))
        if message["type"] == "error":
            raise AssertionError(f"server sent an error: {message}")
        if message["type"] == wanted and predicate(message):
            return message


async def _spawn_ops(server: Server) -> None:
    async with websockets.connect(
        f"{server.ws_url}?token={server.token}", origin=server.origin
    ) as ws:
        await _until(ws, "topic_list")
        await ws.send(json.dumps({"type": "message", "content": "spawn a team called ops"}))
        await _until(ws, "notification", lambda m: "bootstrapped and ready" in m["content"])


def _api(server: Server) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.base_url}/api/v1",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=10,
    )


def _trigger_tasks(api: httpx.Client) -> list[dict]:
    rows = api.get("/tasks", params={"type": "trigger", "limit": 200}).json()["items"]
    return sorted(rows, key=lambda r: r["id"])


def test_window_trigger_ticks_on_workers_and_stops_at_max_ticks(server: Server) -> None:
    asyncio.run(_spawn_ops(server))
    api = _api(server)
    created = api.post(
        "/triggers",
        json={
            "team": "ops",
            "name": "watch",
            "type": "window",
            "config": {
                "watch_window": "* * * * *",  # open all day: the caps must end the ticks
                "tick_interval_ms": 2000,
                "max_ticks_per_window": 3,
                "max_tokens_per_window": 100000,
            },
            "task": "Scan the feeds for new incidents.",
            "overlap_policy": "allow",
        },
    )
    assert created.status_code == 201, created.text
    assert api.post("/triggers/ops/watch/enable").json()["state"] == "active"
    enabled_at = time.monotonic()

    deadline = enabled_at + WAIT
    while time.monotonic() < deadline:
        tasks = _trigger_tasks(api)
        if len(tasks) == 3 and all(t["status"] == "done" for t in tasks):
            break
        time.sleep(0.5)
    else:
        raise AssertionError(
            f"window ticks did not complete: {_trigger_tasks(api)}\n{server.log()}"
        )
    time.sleep(max(0.0, enabled_at + 8 - time.monotonic()))  # two more tick intervals
    tasks = _trigger_tasks(api)
    assert len(tasks) == 3, tasks
    created = [datetime.fromisoformat(t["created_at"]) for t in tasks]
    gaps = [(b - a).total_seconds() for a, b in pairwise(created)]
    assert all(1.2 <= gap <= 2.8 for gap in gaps), gaps  # the 2 s cadence, on the real clock
    details = [api.get(f"/tasks/{t['id']}").json() for t in tasks]
    assert all(d["sessions"] and d["sessions"][0]["stop_reason"] == "completed" for d in details)
    assert all("nothing new" in t["result"] for t in tasks)
    trigger = api.get("/triggers/ops/watch").json()
    assert "max_ticks_per_window" in (trigger["last_alert"] or "")
    assert trigger["next_fire"] == "window open, caps reached"


async def _keyword_conversation(server: Server) -> tuple[dict, list[dict]]:
    seen: list[dict] = []
    async with websockets.connect(
        f"{server.ws_url}?token={server.token}", origin=server.origin
    ) as ws:
        await _until(ws, "topic_list")
        await ws.send(json.dumps({"type": "message", "content": "Start the FIRE DRILL please"}))
        await _until(ws, "ack")
        note = await _until(ws, "notification", lambda m: "Fire drill" in m["content"])
        try:  # nothing else may arrive from the trigger for this one message
            while True:
                seen.append(json.loads(await asyncio.wait_for(ws.recv(), 3)))
        except TimeoutError:
            pass
    return note, seen


def test_keyword_trigger_fires_once_from_a_chat_message(server: Server) -> None:
    asyncio.run(_spawn_ops(server))
    api = _api(server)
    created = api.post(
        "/triggers",
        json={
            "team": "ops",
            "name": "drill",
            "type": "keyword",
            "config": {"keywords": ["fire drill"]},
            "task": "Run the fire drill checklist.",
        },
    )
    assert created.status_code == 201, created.text
    api.post("/triggers/ops/drill/enable")
    note, later = asyncio.run(_keyword_conversation(server))
    assert note == {
        "type": "notification",
        "team": "ops",
        "content": "Fire drill acknowledged: exits checked.",
        **{k: v for k, v in note.items() if k not in ("type", "team", "content")},
    }
    assert not [m for m in later if m["type"] == "notification"]
    tasks = _trigger_tasks(api)
    assert len(tasks) == 1 and tasks[0]["status"] == "done"
    assert "Start the FIRE DRILL please" in tasks[0]["text"]

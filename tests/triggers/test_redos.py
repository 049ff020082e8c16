"""Trigger patterns written by users run on every chat message inside the web process. With a
backtracking engine `(a+)+$` against 27 a's and a `!` takes seconds of CPU while holding the
GIL, so the event loop (every socket, every request) froze with it. On RE2 it is linear: the
web process keeps answering while such a message is routed, and the trigger still works."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.test import Client

from openhive.asgi import application
from openhive.core import saferegex
from tasks.models import Task
from tests.api.factories import UserFactory
from tests.chat.conftest import close_db_connections, connect, litellm_imported, receive_until
from triggers.decisions import message_matches
from trust.services import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)
# Fixtures shared with the socket tests (litellm is imported before any timing starts).
__all__ = ["close_db_connections", "litellm_imported"]

EVIL_PATTERN = "(a+)+$"
EVIL_MESSAGE = "a" * 27 + "!"  # 28 characters; no match, and the worst case for backtracking


def test_the_evil_pattern_is_decided_in_linear_time():
    started = time.monotonic()
    assert not message_matches(
        type="message",
        config={"pattern": EVIL_PATTERN},
        channel_id="ws:x",
        topic_id=1,
        text=EVIL_MESSAGE * 700,  # ~20,000 characters, the input cap
    )
    assert message_matches(
        type="message", config={"pattern": EVIL_PATTERN}, channel_id="ws:x", topic_id=1, text="aaa"
    )
    assert time.monotonic() - started < 1.0


def test_input_beyond_the_cap_is_not_read():
    text = "x" * saferegex.MAX_INPUT_CHARS + "needle"
    config = {"pattern": "needle"}
    assert not message_matches(type="message", config=config, channel_id="", topic_id=1, text=text)


def _create_trigger_through_the_api() -> None:
    UserFactory(username="boss", is_staff=True, password="x")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(username='boss')[1]}")
    body = {
        "team": "main",
        "name": "evil",
        "type": "message",
        "config": {"pattern": EVIL_PATTERN},
        "task": "Someone said a lot of a's.",
        "overlap_policy": "allow",
    }
    assert api.post("/api/v1/triggers", body, content_type="application/json").status_code == 201
    assert api.post("/api/v1/triggers/main/evil/enable").status_code == 200


async def test_the_web_process_keeps_answering_while_an_evil_pattern_meets_its_message(
    main_team, scripted_provider, close_db_connections, litellm_imported
):
    scripted_provider([{"when": {}, "reply": {"content": "noted"}}])
    await sync_to_async(_create_trigger_through_the_api)()
    user = await sync_to_async(UserFactory)(username="alice")
    token = (await sync_to_async(api_token_create)(username=user.username))[1]
    socket = await connect(f"/ws/chat/?token={token}")
    await receive_until(socket, "topic_list")

    # A heartbeat on the event loop and health requests through the ASGI app, while the
    # message is routed (and the trigger pattern evaluated) on a routing thread.
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    health: list[float] = []
    routed = asyncio.Event()

    async def heartbeat() -> None:
        while not routed.is_set():
            before = loop.time()
            await asyncio.sleep(0.02)
            lags.append(loop.time() - before - 0.02)

    async def probe_health() -> None:
        while not routed.is_set():
            before = loop.time()
            probe = HttpCommunicator(
                application, "GET", "/api/v1/health", headers=[(b"host", b"127.0.0.1")]
            )
            answer = await probe.get_response(timeout=30)
            assert answer["status"] == 200
            health.append(loop.time() - before)
            await asyncio.sleep(0.05)

    watchers = [asyncio.create_task(heartbeat()), asyncio.create_task(probe_health())]
    await socket.send_json_to({"type": "message", "content": EVIL_MESSAGE})
    seen = await receive_until(socket, "response", timeout=60)
    routed.set()
    await asyncio.gather(*watchers)
    assert seen[0]["type"] == "ack" and seen[-1]["content"] == "noted"
    assert lags and health
    # Generous margins for a loaded machine; the backtracking engine stalled for ~10 s.
    assert max(lags) < 1.5, f"event loop stalled for {max(lags):.2f} s"
    assert max(health) < 3.0, f"a health request took {max(health):.2f} s"
    assert await Task.objects.filter(type=Task.Type.TRIGGER).acount() == 0

    # The trigger still works on a message it matches.
    await socket.send_json_to({"type": "message", "content": "aaaa"})
    await receive_until(socket, "response", timeout=60)
    assert await Task.objects.filter(type=Task.Type.TRIGGER).acount() == 1
    await socket.disconnect()


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("(a)\\1", "no backreferences"),
        ("(?<!x)y", "lookaround"),
        ("a" * (saferegex.MAX_PATTERN_CHARS + 1), "longer than 1000 characters"),
    ],
)
def test_patterns_re2_cannot_run_are_refused_at_the_api_with_the_reason(
    main_team, pattern, fragment
):
    UserFactory(username="boss", is_staff=True, password="x")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(username='boss')[1]}")
    body = {"team": "main", "name": "bad", "type": "keyword", "config": {"regex": pattern}}
    response = api.post("/api/v1/triggers", {**body, "task": "t"}, content_type="application/json")
    assert response.status_code == 400 and fragment in response.json()["detail"]

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections

from openhive.asgi import application
from openhive.chat import dbpool
from openhive.chat.consumers import ChatConsumer

ORIGIN = (b"origin", b"http://127.0.0.1")


@pytest.fixture
def trust_policy(openhive_dirs: Path) -> Callable[[dict], Path]:
    def write(section: dict) -> Path:
        path = openhive_dirs / "data" / "config" / "channels.yaml"
        path.write_text(yaml.safe_dump({"trust": section}))
        return path

    return write


@pytest.fixture
def fast_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


async def connect(path: str, headers: list | None = None) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, path, headers=[ORIGIN, *(headers or [])])
    connected, _ = await communicator.connect(timeout=15)
    assert connected
    return communicator


async def receive_until(
    communicator: WebsocketCommunicator, wanted: str, *, count: int = 1, timeout: float = 20
) -> list[dict]:
    """Everything received up to and including the `count`-th message of type `wanted`."""
    seen: list[dict] = []
    while True:
        message = await communicator.receive_json_from(timeout=timeout)
        seen.append(message)
        if message["type"] == wanted:
            count -= 1
            if count == 0:
                return seen


async def drain(communicator: WebsocketCommunicator, seconds: float = 0.3) -> list[dict]:
    """Whatever arrives until `seconds` pass quietly (to check that nothing did). A timeout of
    receive_json_from would cancel the application; receive_nothing does not."""
    seen: list[dict] = []
    while not await communicator.receive_nothing(timeout=seconds):
        seen.append(await communicator.receive_json_from())
    return seen


@pytest.fixture
async def close_db_connections():
    yield
    await _turns_finished()
    await sync_to_async(connections.close_all)()
    await sync_to_async(dbpool.close_db_connections)()


async def _turns_finished(timeout: float = 30) -> None:
    """A socket closed after its ack leaves its turn running (its answer is stored anyway).
    Wait for it: a turn still writing while the test database is flushed deadlocked the
    flush's TRUNCATE on PostgreSQL, and its next query hit a closed test database."""
    turn = ChatConsumer._route_and_run.__code__
    running = [
        task for task in asyncio.all_tasks() if getattr(task.get_coro(), "cr_code", None) is turn
    ]
    if running:
        await asyncio.wait(running, timeout=timeout)


@pytest.fixture(scope="session", autouse=True)
def litellm_imported() -> None:
    """Import litellm once, before any socket test waits for an answer: the import takes
    seconds (more on a busy machine) and would otherwise count against one test's timeout."""
    from openhive.engine.llm import get_litellm

    get_litellm()

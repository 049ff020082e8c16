"""The web process answers before it imports litellm: `openhive.webserver.WebServer` starts
that import (seconds of CPU) in the background once it listens, not while the application
loads. A real uvicorn server on a loopback port."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest
import uvicorn

from openhive.core import heap
from openhive.webserver import WebServer


async def _app(scope, receive, send) -> None:  # never called: nothing connects
    raise AssertionError("no request expected")


@pytest.mark.parametrize("preload_llm", [True, False])
async def test_litellm_is_imported_in_the_background_only_once_the_server_listens(
    monkeypatch, preload_llm: bool
):
    seen: list[tuple[bool, bool]] = []
    imported = threading.Event()
    config = uvicorn.Config(_app, host="127.0.0.1", port=0, lifespan="off", log_config=None)
    config.load()
    server = WebServer(config, preload_llm=preload_llm)

    def import_litellm() -> None:
        listening = bool(server.servers and server.servers[0].is_serving())
        seen.append((listening, threading.current_thread() is threading.main_thread()))
        imported.set()

    monkeypatch.setattr("openhive.engine.llm.get_litellm", import_litellm)
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        assert server.started
        await asyncio.to_thread(imported.wait, 10 if preload_llm else 0.5)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
    # listening, and on a thread of its own
    assert seen == ([(True, False)] if preload_llm else [])


async def test_a_server_whose_application_loads_no_django_apps_still_collects_garbage():
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    config = uvicorn.Config(_app, host="127.0.0.1", port=0, lifespan="off", log_config=None)
    server = WebServer(config, preload_llm=False)
    heap.quiet_start()
    try:
        assert gc.isenabled() is False
        serving = asyncio.create_task(server.serve())
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        assert server.started
        assert gc.isenabled() is True
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
    finally:
        heap._quiet_start[0] = False
        if frozen == 0:
            gc.unfreeze()
        if enabled:
            gc.enable()

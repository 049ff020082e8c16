"""`demo`: the offline walkthrough end to end. Init where needed (scripted provider, demo
script, a chat user and token), start `serve`, send the two chat messages of the README,
print what comes back as it arrives, then stop the server cleanly. Run it again on the same
data dir: the second time the ops team exists already, and the chat says so."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from openhive.core import paths
from openhive.engine.providers import provider_problem, providers_file, resolve_profile
from trust.services import api_token_create

from .base import Verb
from .serve import port_problem
from .setup import install_demo_script, use_demo_provider

MESSAGES = ("spawn a team called ops", "ask ops to check the disks")
DEMO_USER = "demo"
# A tool that hands work to a team: its result arrives later, as a notification.
LATER = {"spawn_team", "delegate_task"}
START_LIMIT_SECONDS = 180.0


class Demo(Verb):
    help = (
        "demo [--port N] [--wait S]: the offline walkthrough end to end: init where needed, "
        "start the server, send the two chat messages, print the replies as they arrive, stop."
    )

    def migrates(self, options: dict[str, Any]) -> bool:
        return True

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--port", type=int, default=8000, help="the port serve listens on (default 8000)"
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=120.0,
            help="seconds to wait for each team's answer (default 120)",
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        out = command.stdout
        port = options["port"]
        problem = port_problem("127.0.0.1", port)
        if problem:
            raise CommandError(problem)
        self._prepare(out)
        _, token = api_token_create(username=DEMO_USER, name="demo", scope="chat")
        log_path = paths.data_dir() / "demo-serve.log"
        _say(out, f"Starting the server on port {port} (its log: {log_path}) ...")
        server = _start_serve(port, log_path)
        try:
            _wait_ready(server, log_path)
            _say(out, f"Chatting as {DEMO_USER!r} on ws://127.0.0.1:{port}/ws/chat/")
            ok = asyncio.run(_chat(out, port, token, options["wait"]))
        finally:
            _say(out, "Stopping the server ...")
            _stop(server)
        if not ok:
            raise CommandError(f"the demo did not finish as expected; see {log_path}")
        _say(out, "Demo finished. Run `manage.py openhive serve` to keep the server running.")

    def _prepare(self, out) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        install_demo_script()
        if use_demo_provider():
            _say(out, f"Offline demo: {providers_file()} now uses scripted/demo.yaml.")
        problem = provider_problem("default")
        if problem:
            raise CommandError(problem)
        if not resolve_profile("default").is_scripted:
            # The demo's two messages would go to a real model (and cost money).
            raise CommandError(
                f"{providers_file()} has a real default profile; the demo needs the offline "
                "one. Run it in a data dir of its own: OPENHIVE_DATA_DIR=./demo-data "
                "manage.py openhive demo"
            )
        users = get_user_model().objects
        if not users.filter(username=DEMO_USER).exists():
            users.create_user(username=DEMO_USER, password=None)


def _say(out, text: str) -> None:
    """Printed as it happens, also when stdout is a pipe (a log, a test)."""
    out.write(text)
    out.flush()


def _start_serve(port: int, log_path: Path) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                str(settings.BASE_DIR / "manage.py"),
                "openhive",
                "serve",
                "--port",
                str(port),
                "--no-migrate",
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            text=True,
        )


def _wait_ready(server: subprocess.Popen, log_path: Path) -> None:
    """Until serve prints its banner (the port answers and the workers are ready)."""
    deadline = time.monotonic() + START_LIMIT_SECONDS
    assert server.stdout is not None
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if line.startswith("OpenHive is ready"):
            return
        if not line and server.poll() is not None:
            raise CommandError(f"the server stopped (code {server.returncode}); see {log_path}")
    raise CommandError(f"the server did not start within {START_LIMIT_SECONDS:g} s")


def _stop(server: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


async def _chat(out, port: int, token: str, wait: float) -> bool:
    import websockets

    ok = True
    url = f"ws://127.0.0.1:{port}/ws/chat/?token={token}"
    async with websockets.connect(url, origin=f"http://127.0.0.1:{port}") as ws:
        for text in MESSAGES:
            _say(out, f"\nyou: {text}")
            await ws.send(json.dumps({"type": "message", "content": text}))
            ok = await _one_exchange(out, ws, wait) and ok
    return ok


async def _one_exchange(out, ws, wait: float) -> bool:
    """Print the frames of one message until its answer is complete: the reply, and then the
    team's notification if a tool handed work to a team successfully."""
    expect_later = False
    replied = notified = False
    deadline = time.monotonic() + wait
    while True:
        remaining = deadline - time.monotonic()
        try:
            frame = json.loads(await asyncio.wait_for(ws.recv(), max(remaining, 0.1)))
        except TimeoutError:
            _say(out, f"  (no answer within {wait:g} s)")
            return False
        kind = frame.get("type")
        if kind == "event" and frame.get("event") == "tool_result":
            success = frame.get("success")
            _say(out, f"  tool {frame.get('name')}: {'ok' if success else 'failed'}")
            expect_later = expect_later or (success and frame.get("name") in LATER)
        elif kind == "response":
            _say(out, f"main: {frame.get('content', '')}")
            replied = True
            if not expect_later or notified:
                return True
            _say(out, "  (waiting for the team's answer ...)")
        elif kind == "notification":
            team = frame.get("team")
            _say(out, f"[{team}] {frame.get('content', '')}" if team else frame.get("content", ""))
            notified = True
            if replied:
                return True
        elif kind == "error":
            _say(out, f"error: {frame.get('message')}")
            return False

"""`serve`: migrate, then daphne + the django-q2 cluster + the engine loop as one process
group. Ctrl-C or SIGTERM stops them all; if one dies, the others are stopped too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from teams.services import team_ensure_main

from .base import Verb

STOP_GRACE_SECONDS = 15


class Serve(Verb):
    help = "Migrate, then run the web server, workers and engine loop together."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--no-migrate", action="store_true", help="skip migrations")

    def run(self, command: BaseCommand, **options: Any) -> None:
        if not options["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        team_ensure_main()
        manage = str(settings.BASE_DIR / "manage.py")
        host, port = options["host"], options["port"]
        specs = {
            "web": [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                host,
                "-p",
                str(port),
                "openhive.asgi:application",
            ],
            "workers": [sys.executable, manage, "qcluster"],
            "engine": [sys.executable, manage, "openhive", "engine"],
        }
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        preload = {"web": "background", "workers": "now", "engine": ""}
        children = {
            name: subprocess.Popen(cmd, env={**os.environ, "OPENHIVE_PRELOAD_LLM": preload[name]})
            for name, cmd in specs.items()
        }
        shown = "localhost" if host in ("127.0.0.1", "::1") else host
        command.stdout.write(
            f"OpenHive is serving on http://{shown}:{port}/  (admin /admin/, API /api/v1/docs, "
            f"chat ws://{shown}:{port}/ws/chat/). Ctrl-C stops it."
        )
        sys.stdout.flush()
        exit_code = 0
        while not stop.is_set():
            for name, child in children.items():
                if child.poll() is not None:
                    command.stderr.write(f"{name} exited with code {child.returncode}; stopping")
                    exit_code = 1
                    stop.set()
                    break
            stop.wait(0.5)
        _stop_all(children)
        if exit_code:
            raise SystemExit(exit_code)


def _stop_all(children: dict[str, subprocess.Popen]) -> None:
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for child in children.values():
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


class Engine(Verb):
    help = "Run the engine loop only (dispatcher, lease reaper); one of several may lead."

    def run(self, command: BaseCommand, **options: Any) -> None:
        from openhive.clock import EngineLoop

        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        EngineLoop().run(stop)

"""`serve`: migrate, then daphne + the django-q2 cluster + the engine loop, stopped together.

Each child runs in a process group of its own, so serve can end it with everything it forked
(django-q2's sentinel and worker processes): Ctrl-C or SIGTERM, to serve or to its whole group,
stops every process within a few seconds and leaves none behind; the tasks that were running
go back to the queue at once. If one child dies, the others are stopped too."""

from __future__ import annotations

import contextlib
import ctypes
import logging
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

from tasks.services import tasks_release_dead_local_workers
from teams.services import team_ensure_main

from .base import Verb

logger = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

# SIGTERM first, SIGKILL to whatever of a child's group is left after this: within the 5 s
# that service managers and people at a terminal give.
STOP_GRACE_SECONDS = 3.0


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
                # daphne's access log prints query strings (tokens) unscrubbed; ours is in asgi.
                "-v",
                "0",
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
        _adopt_orphans()
        preload = {"web": "background", "workers": "now", "engine": ""}
        children = {
            name: subprocess.Popen(
                cmd,
                env={**os.environ, "OPENHIVE_PRELOAD_LLM": preload[name]},
                start_new_session=True,
                preexec_fn=_stop_with_parent,
            )
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
        _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for child in children.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=max(0.05, deadline - time.monotonic()))
    # A child that exited may have left forked processes in its group (django-q2's workers
    # outlive a stopped cluster parent): end every group, then reap.
    for child in children.values():
        _signal_group(child, signal.SIGKILL)
        child.wait()
    _reap_adopted()
    _release_interrupted_tasks()


def _adopt_orphans() -> None:
    """Become the reaper of our descendants: a process whose parent dies first (a django-q2
    worker whose cluster parent was killed) is re-parented to serve, not to PID 1, so serve
    can collect it and leave no zombie behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)


def _reap_adopted(limit_seconds: float = 2.0) -> None:
    deadline = time.monotonic() + limit_seconds
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.02)


def _signal_group(child: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, sig)


def _release_interrupted_tasks() -> None:
    try:
        released = tasks_release_dead_local_workers()
    except Exception:  # the database may be the reason we stop; the reaper covers it later
        logger.warning("could not hand back running tasks; their leases will expire instead")
        return
    if released:
        logger.info("handed %d running task(s) back to the queue: %s", len(released), released)


def _stop_with_parent() -> None:
    """In the child before exec: if serve dies without stopping it (SIGKILL), the child is
    told to stop rather than left running on its own."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Engine(Verb):
    help = "Run the engine loop only (dispatcher, lease reaper); one of several may lead."

    def run(self, command: BaseCommand, **options: Any) -> None:
        from openhive.clock import EngineLoop

        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        EngineLoop().run(stop)

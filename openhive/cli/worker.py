"""`worker`: a pull-mode queue worker. It claims the most urgent admissible tasks of any teams
straight from the task table (no broker), as many at once as it has idle threads, and runs
them; an idle worker wakes within milliseconds of an enqueue (LISTEN/NOTIFY on PostgreSQL, a
watched file on SQLite); run as many processes on as
many machines as you like beside (or instead of) the django-q2 cluster. Expired leases are
reaped here too, so a killed worker's task comes back even without an engine loop."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections, connections
from django.utils import timezone

from openhive.engine.llm import get_litellm
from openhive.engine.selectors import BEAT_SECONDS
from openhive.engine.services import worker_beat, worker_gone
from tasks.pull import PullWorker
from tasks.runner import run_pulled, worker_id
from tasks.services import tasks_reap_expired_leases

from .base import NONE, Verb

logger = logging.getLogger(__name__)


class Worker(Verb):
    help = (
        "worker [--threads N] [--exit-when-idle S]: claim and run queued tasks straight from "
        "the task table (pull mode, no engine or qcluster needed); one log line per task."
    )

    system_checks = NONE

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--threads",
            type=int,
            default=settings.Q_CLUSTER["workers"],
            help="tasks run at once (default OPENHIVE_WORKERS)",
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=0.2,
            help="at most this many seconds between looks at an empty queue (new work wakes "
            "the worker at once)",
        )
        parser.add_argument(
            "--exit-when-idle",
            type=float,
            default=0.0,
            metavar="SECONDS",
            help="exit once no task has run for this long (0 = run until stopped)",
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        get_litellm()  # its import takes seconds: pay it before claiming, not inside a lease
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        idle_limit = options["exit_when_idle"]
        pull = PullWorker(
            threads=options["threads"], execute=run_pulled, poll=options["poll"], stop=stop
        )
        pull.start()
        name = f"{socket.gethostname()}:{os.getpid()}"
        beat = _Heartbeat(name, pull)
        beat.maybe()
        _announce_ready(os.environ.get("OPENHIVE_READY_DIR", ""))
        command.stdout.write(f"worker {worker_id()} running {pull.threads} thread(s)")
        reap_every = max(1.0, settings.OPENHIVE["LEASE_SECONDS"] / 2)
        next_reap = 0.0
        try:
            while not stop.wait(min(reap_every, 0.2)):
                if time.monotonic() >= next_reap:
                    next_reap = time.monotonic() + reap_every
                    try:
                        tasks_reap_expired_leases()
                    except Exception:  # a database blip: try again next round
                        logger.exception("lease reaping failed")
                        close_old_connections()
                beat.maybe()
                if idle_limit and not pull.busy and time.monotonic() - pull.last_work > idle_limit:
                    stop.set()
            pull.join()
        finally:
            with contextlib.suppress(Exception):  # stopping: a stale row ages out anyway
                worker_gone(name=name)
            connections.close_all()


class _Heartbeat:
    """The worker's row on the dashboard (engine.WorkerBeat), renewed every BEAT_SECONDS."""

    def __init__(self, name: str, pull: PullWorker) -> None:
        self.name, self.pull, self.next = name, pull, 0.0

    def maybe(self) -> None:
        if time.monotonic() < self.next:
            return
        self.next = time.monotonic() + BEAT_SECONDS
        try:
            worker_beat(
                name=self.name, threads=self.pull.threads, busy=self.pull.busy, now=timezone.now()
            )
        except Exception:  # a database blip: the next beat tries again
            logger.warning("worker heartbeat failed", exc_info=True)
            close_old_connections()


def _announce_ready(ready_dir: str) -> None:
    """Under `serve`: a file in the folder serve watches, so its banner comes only once the
    workers can run tasks."""
    if ready_dir:
        with contextlib.suppress(OSError):
            (Path(ready_dir) / f"worker-{os.getpid()}").touch()

"""`worker`: a pull-mode queue worker. Each thread claims the most urgent admissible task of
any team straight from the task table (no broker) and runs it; run as many processes on as
many machines as you like beside (or instead of) the django-q2 cluster. Expired leases are
reaped here too, so a killed worker's task comes back even without an engine loop."""

from __future__ import annotations

import logging
import signal
import threading
import time
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections, connections

from openhive.engine.llm import get_litellm
from tasks.runner import run_next_task, worker_id
from tasks.services import tasks_reap_expired_leases

from .base import Verb

logger = logging.getLogger(__name__)


class Worker(Verb):
    help = (
        "worker [--threads N] [--exit-when-idle S]: claim and run queued tasks straight from "
        "the task table (pull mode, no engine or qcluster needed); one log line per task."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--threads",
            type=int,
            default=settings.Q_CLUSTER["workers"],
            help="tasks run at once (default OPENHIVE_WORKERS)",
        )
        parser.add_argument(
            "--poll", type=float, default=0.2, help="seconds between looks at an empty queue"
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
        last_work = [time.monotonic()]
        self._busy = 0
        self._busy_lock = threading.Lock()
        threads = [
            threading.Thread(
                target=self._loop, args=(stop, options["poll"], last_work), name=f"worker-{i}"
            )
            for i in range(max(1, options["threads"]))
        ]
        for thread in threads:
            thread.start()
        command.stdout.write(f"worker {worker_id()} running {len(threads)} thread(s)")
        reap_every = max(1.0, settings.OPENHIVE["LEASE_SECONDS"] / 2)
        while not stop.wait(reap_every if not idle_limit else min(reap_every, 0.2)):
            try:
                tasks_reap_expired_leases()
            except Exception:  # a database blip: try again next round
                logger.exception("lease reaping failed")
                close_old_connections()
            if idle_limit and not self._busy and time.monotonic() - last_work[0] > idle_limit:
                stop.set()
        for thread in threads:
            thread.join()

    def _loop(self, stop: threading.Event, poll: float, last_work: list[float]) -> None:
        try:
            while not stop.is_set():
                with self._busy_lock:
                    self._busy += 1
                try:
                    status = run_next_task()
                except Exception:  # never let one bad claim end the thread
                    logger.exception("worker claim failed")
                    close_old_connections()
                    status = None
                finally:
                    with self._busy_lock:
                        self._busy -= 1
                if status is None:
                    stop.wait(poll)
                else:
                    last_work[0] = time.monotonic()
        finally:
            connections.close_all()

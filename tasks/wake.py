"""Waking idle pull workers when work arrives, so a task starts within milliseconds of its
enqueue without workers polling the database hot.

- PostgreSQL: `NOTIFY openhive_tasks` inside the enqueueing transaction (delivered at commit,
  to every listening worker on every machine; an enqueue sends it in the INSERT's own query);
  each worker process holds one LISTEN connection.
- SQLite (one machine by nature): the enqueue touches a file in the run directory after
  commit; each worker process watches its modification time (a stat every few milliseconds,
  no database read).
A worker still looks at the queue every `--poll` seconds, for work no signal announces (a
deferred task whose time came, a reaped lease)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from django.conf import settings
from django.db import connection, connections, transaction

logger = logging.getLogger(__name__)

CHANNEL = "openhive_tasks"
# PostgreSQL: what announces work, in the transaction that makes it pending.
WAKE_STATEMENT = f"NOTIFY {CHANNEL}"
# How often the SQLite watcher looks at the wake file: the floor of its start latency.
FILE_WATCH_SECONDS = 0.003


def wake_file() -> Path:
    return Path(settings.RUN_DIR) / "queue.wake"


def wake_workers() -> None:
    """Announce new pending work; call inside the transaction that makes it pending."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(WAKE_STATEMENT)
        return
    transaction.on_commit(_touch)


def _touch() -> None:
    path = wake_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # One byte more each time: the size changes even when two touches share a clock tick.
        with path.open("ab") as f:
            f.write(b".")
            if f.tell() > 4096:
                f.truncate(0)
    except OSError:  # the workers' poll still finds the task
        logger.warning("could not touch the queue wake file %s", path, exc_info=True)


class Waker:
    """Sets `event` whenever work is announced, from a daemon thread, until `stop` is set."""

    def __init__(self, event: threading.Event, stop: threading.Event) -> None:
        self.event = event
        self.stop = stop
        self.thread = threading.Thread(target=self._run, name="queue-wake", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            if connection.vendor == "postgresql":
                self._listen()
            else:
                self._watch_file()
        except Exception:  # the poll still finds the work, only later
            logger.warning("queue wake-up listener stopped", exc_info=True)

    def _listen(self) -> None:
        wrapper = connections.create_connection("default")
        try:
            wrapper.ensure_connection()
            raw = wrapper.connection
            raw.autocommit = True
            raw.execute(f"LISTEN {CHANNEL}")
            while not self.stop.is_set():
                for _ in raw.notifies(timeout=0.5, stop_after=1):
                    self.event.set()
        finally:
            wrapper.close()

    def _watch_file(self) -> None:
        path = wake_file()
        last = _mtime(path)
        while not self.stop.wait(FILE_WATCH_SECONDS):
            now = _mtime(path)
            if now != last:
                last = now
                self.event.set()


def _mtime(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return (stat.st_mtime_ns, stat.st_size)

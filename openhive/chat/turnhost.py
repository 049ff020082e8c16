"""The chat turn host: `python -m openhive.chat.turnhost <fd>`, started by a web process
(`turnpool.ProcessTurns`) with one end of a socket pair. It runs the calls it is sent (route a
message, run a turn) on its own threads and writes back each turn's events and its result,
so the web process's event loop only acks and forwards. It ends when the web process does
(its end of the socket closes)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import signal
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openhive.core.heap import quiet_start

logger = logging.getLogger("openhive.chat.turnhost")
PR_SET_PDEATHSIG = 1


class Host:
    def __init__(self, sock: socket.socket, threads: int) -> None:
        from .turnpool import HEADER

        self.sock = sock
        self.header = HEADER
        self.write_lock = threading.Lock()
        self.pool = ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="chat-turn", initializer=_leave_stops_to_main
        )

    def send(self, call_id: int, kind: str, value: Any) -> None:
        try:
            payload = pickle.dumps((call_id, kind, value), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an unpicklable result must still end the call
            payload = pickle.dumps((call_id, "error", f"unsendable result: {exc}"))
        with self.write_lock:
            self.sock.sendall(self.header.pack(len(payload)) + payload)

    def run(self) -> None:
        stream = self.sock.makefile("rb")
        while True:
            header = stream.read(self.header.size)
            if len(header) < self.header.size:
                return  # the web process is gone
            (size,) = self.header.unpack(header)
            body = stream.read(size)
            if len(body) < size:
                return
            call_id, op, kwargs = pickle.loads(body)
            self.pool.submit(self.handle, call_id, op, kwargs)

    def handle(self, call_id: int, op: str, kwargs: dict) -> None:
        try:
            self._handle(call_id, op, kwargs)
        finally:
            # The thread keeps its database connection for its next call (a new one cost a
            # PostgreSQL server process, or a SQLite file and its PRAGMAs, twice a message);
            # one that broke or was left in a transaction is closed. The host's connections
            # end with it.
            from openhive.core.db import keep_connection_if_sound

            keep_connection_if_sound()

    def _handle(self, call_id: int, op: str, kwargs: dict) -> None:
        from openhive.core.errors import DomainError

        from .turn import chat_turn, route_inbound

        try:
            if op == "route":
                result = route_inbound(kwargs["inbound"])
            elif op == "turn":
                result = chat_turn(**kwargs, on_event=lambda e: self.send(call_id, "event", e))
            elif op == "ping":
                result = {"pid": os.getpid(), "thread": threading.current_thread().name}
            else:
                raise ValueError(f"unknown call {op!r}")
        except DomainError as exc:
            self._reply(call_id, "domain_error", (exc.code, exc.message))
        except Exception as exc:
            logger.exception("chat turn host: %s failed", op)
            self._reply(call_id, "error", type(exc).__name__)
        else:
            self._reply(call_id, "result", result)

    def _reply(self, call_id: int, kind: str, value: Any) -> None:
        try:
            self.send(call_id, kind, value)
        except OSError:
            os._exit(0)  # nobody to answer to


# The signals a stop sends (Ctrl-C, service managers): the host exits at once on either.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop(signum: int, _frame: object) -> None:
    """A stop of the server reaches the web process and this host together. Exit at once and
    quietly, as SIGTERM's default would, and on Ctrl-C too: not with a KeyboardInterrupt
    trace, then a wait for the turns in flight that nobody will read. Their messages are
    stored; what a turn had not committed is not written."""
    os._exit(128 + signum)


def _leave_stops_to_main() -> None:
    """The kernel hands a stop signal to any thread that does not block it. Taken by another
    thread, it only set Python's flag, and the main thread, blocked reading the web process's
    socket, did not run `_stop` until the next call arrived (30 s in a loaded CI run)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def main() -> None:
    # Threads started while the host sets up inherit this mask; the main thread lifts it below.
    _leave_stops_to_main()
    fd = int(sys.argv[1])
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    # The web process may have died between fork and prctl.
    parent = os.environ.get("OPENHIVE_TURNHOST_PARENT")
    if parent and os.getppid() != int(parent):
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    quiet_start()  # back on once the apps are loaded
    import django

    django.setup()
    from django.conf import settings

    from . import turn  # noqa: F401  (import the turn path before the first call needs it)

    for stop in STOP_SIGNALS:
        signal.signal(stop, _stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    sock = socket.socket(fileno=fd)
    Host(sock, settings.OPENHIVE["CHAT_TURN_THREADS"]).run()
    # Turns still running have no one to answer to.
    os._exit(0)


if __name__ == "__main__":
    main()

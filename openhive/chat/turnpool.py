"""Where the main agent's chat turns run: never on the web process's event loop, and (by
default) not in the web process at all.

A turn is Python work for most of its life (prompt assembly, the engine's bookkeeping, the
model port); on threads of the web process it holds the GIL that the event loop needs to ack
the next message, so a burst of turns delayed acks by seconds. Two executors:

- `process` (the default): one turn host process per web process (`openhive.chat.turnhost`,
  started on first use and again if it dies). Routing and turns run on its threads; their
  events and results come back over a socket pair. It needs no Redis and no queue, so `serve`
  on SQLite works as before, and chat turns never wait behind background tasks.
- `threads`: the web process's own turn threads (tests, which run the socket in-process against
  a test database the host could not see).

The consumer keeps the ordering (routing in arrival order, one turn at a time per topic); the
executor only runs what it is handed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import pickle
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection

from openhive.core.errors import DomainError

from .dbpool import on_turn_thread
from .models import Message
from .topics import Routed
from .turn import Inbound, TurnResult, chat_turn, route_inbound
from .turnhost import STOP_SIGNALS

logger = logging.getLogger(__name__)

HEADER = struct.Struct("!I")
# A frame is one pickled call, event or result; a turn's reply is far below this.
MAX_FRAME_BYTES = 64 * 1024 * 1024
# How long the web process waits for a host that closed its socket to exit, to say why it did.
EXIT_WAIT_SECONDS = 2.0

EventSink = Callable[[dict], None]


class TurnHostGone(Exception):
    """The turn host process ended while a call was running (its result is lost)."""


def _closing(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        finally:
            connection.close()

    return run


# The web process's turn threads close their connection after each call: in tests they run
# against a test database that is dropped at the end, which an open connection would block.
_route_closing, _turn_closing = _closing(route_inbound), _closing(chat_turn)


class ThreadTurns:
    """Turns on the web process's turn threads."""

    name = "threads"

    async def route(self, inbound: Inbound) -> Routed:
        return await on_turn_thread(_route_closing)(inbound)

    async def turn(
        self, *, routed: Routed, message: Message, sender_id: str, on_event: EventSink
    ) -> TurnResult:
        return await on_turn_thread(_turn_closing)(
            routed=routed, message=message, sender_id=sender_id, on_event=on_event
        )


class ProcessTurns:
    """Turns in a turn host process; calls are multiplexed over one socket pair."""

    name = "process"

    def __init__(self, *, preload_llm: bool = True) -> None:
        # The host exists to call models: import litellm at its start, not in the first turn.
        self.preload_llm = preload_llm
        self.process: asyncio.subprocess.Process | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task | None = None
        self.pending: dict[int, tuple[asyncio.Future, EventSink | None]] = {}
        self.ids = itertools.count(1)
        self.starting: asyncio.Lock | None = None

    async def route(self, inbound: Inbound) -> Routed:
        return await self.call("route", {"inbound": inbound})

    async def turn(
        self, *, routed: Routed, message: Message, sender_id: str, on_event: EventSink
    ) -> TurnResult:
        kwargs = {"routed": routed, "message": message, "sender_id": sender_id}
        return await self.call("turn", kwargs, on_event)

    async def call(self, op: str, kwargs: dict, on_event: EventSink | None = None) -> Any:
        writer = await self._ensure_started()
        call_id = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.pending[call_id] = (future, on_event)
        try:
            payload = pickle.dumps((call_id, op, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
            writer.write(HEADER.pack(len(payload)) + payload)
            await writer.drain()
            return await future
        finally:
            self.pending.pop(call_id, None)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def _ensure_started(self) -> asyncio.StreamWriter:
        if self.starting is None:
            self.starting = asyncio.Lock()
        async with self.starting:
            alive = self.process is not None and self.process.returncode is None
            if alive and self.writer is not None and not self.writer.is_closing():
                return self.writer
            await self._start()
            assert self.writer is not None
            return self.writer

    async def _start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "openhive.chat.turnhost",
                str(theirs.fileno()),
                cwd=str(settings.BASE_DIR),
                env={
                    **os.environ,
                    "OPENHIVE_PRELOAD_LLM": "now" if self.preload_llm else "",
                    "OPENHIVE_TURNHOST_PARENT": str(os.getpid()),
                },
                pass_fds=[theirs.fileno()],
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        reader, self.writer = await asyncio.open_connection(sock=ours, limit=MAX_FRAME_BYTES)
        self.reader_task = asyncio.get_running_loop().create_task(self._read(reader))
        logger.info("chat turn host started (pid %s)", self.process.pid)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                header = await reader.readexactly(HEADER.size)
                (size,) = HEADER.unpack(header)
                call_id, kind, value = pickle.loads(await reader.readexactly(size))
                self._deliver(call_id, kind, value)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception:
            logger.exception("reading from the chat turn host failed")
        finally:
            process = self.process
            self._host_gone()
            await _report_exit(process)

    def _deliver(self, call_id: int, kind: str, value: Any) -> None:
        entry = self.pending.get(call_id)
        if entry is None:
            return  # the caller went away (its socket closed); the turn is stored anyway
        future, on_event = entry
        if kind == "event":
            if on_event is not None:
                try:
                    on_event(value)
                except Exception:
                    logger.debug("a turn event could not be forwarded", exc_info=True)
            return
        if future.done():
            return
        if kind == "result":
            future.set_result(value)
        elif kind == "domain_error":
            code, message = value
            future.set_exception(DomainError(message, code=code))
        else:
            future.set_exception(RuntimeError(f"the chat turn host failed: {value}"))

    def _host_gone(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.writer = None
        for future, _ in list(self.pending.values()):
            if not future.done():
                future.set_exception(TurnHostGone("the chat turn host stopped during a turn"))
        self.pending.clear()

    async def stop(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.process.wait(), 10)
        if self.reader_task is not None:
            self.reader_task.cancel()


async def _report_exit(process: asyncio.subprocess.Process | None) -> None:
    """Say why the turn host went away. Stopping the server signals its whole process group,
    the turn host with it, which is no news; anything else is worth a warning."""
    if process is None:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), EXIT_WAIT_SECONDS)
    code = process.returncode
    told = {128 + s for s in STOP_SIGNALS} | {-s for s in STOP_SIGNALS}
    if code in told:
        logger.info("the chat turn host stopped on a stop signal (exit status %s)", code)
    elif code != 0:
        why = "it has not exited" if code is None else f"exit status {code}"
        logger.warning("lost contact with the chat turn host (%s); a new one starts on demand", why)


_executors: dict[asyncio.AbstractEventLoop, ThreadTurns | ProcessTurns] = {}


def turn_executor() -> ThreadTurns | ProcessTurns:
    """The executor of this event loop (a turn host belongs to the loop that reads it)."""
    loop = asyncio.get_running_loop()
    executor = _executors.get(loop)
    if executor is None:
        for old in [k for k in _executors if k.is_closed()]:
            del _executors[old]
        mode = settings.OPENHIVE["CHAT_TURNS"]
        executor = _executors[loop] = ProcessTurns() if mode == "process" else ThreadTurns()
    return executor

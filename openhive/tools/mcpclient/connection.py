"""One client session with one MCP server, owned by the client loop thread (`runtime.py`):
the transport (a stdio subprocess, or streamable HTTP to the address the SSRF guard checked),
the handshake, the tool list and its refresh, and the server's stderr for error messages."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import tempfile
import time
from typing import Any

from openhive.core.guards import ssrf

from .servers import ServerPlan

START_TIMEOUT_SECONDS = 30.0
STDERR_TAIL_BYTES = 2000
STDERR_KEEP_BYTES = 1024 * 1024


class Connection:
    """One client session with one server, owned by the loop thread."""

    def __init__(self, plan: ServerPlan, target: ssrf.Target | None) -> None:
        self.plan = plan
        self.target = target
        self.session: Any = None
        self.tools: list[Any] = []
        self.tools_stale = False
        self.last_used = time.monotonic()
        self.task: asyncio.Task | None = None
        self.stop_event: asyncio.Event | None = None
        # The server's stderr, for the tail shown with a failure (a real file: it gets the fd).
        # Append-only, so trimming it (`trim_stderr`) works while the server keeps writing.
        self.errlog = None
        if plan.transport == "stdio":
            self.errlog = tempfile.TemporaryFile(  # noqa: SIM115 (closed with the connection)
                "w+", encoding="utf-8", errors="replace"
            )
            fd = self.errlog.fileno()
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)

    @property
    def alive(self) -> bool:
        return self.session is not None and self.task is not None and not self.task.done()

    async def open(self) -> None:
        self.stop_event = asyncio.Event()
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self.task = asyncio.create_task(self._run(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_SECONDS)
        except BaseException:
            await self.close()
            raise

    async def _run(self, ready: asyncio.Future) -> None:
        # Entered and left in this one task: anyio's cancel scopes require it.
        from mcp.client.session import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._on_message)
                )
                await session.initialize()
                self.tools = await _list_tools(session)
                self.session = session
                ready.set_result(None)
                await self.stop_event.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.plan.config
        if config.command:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=config.command, args=config.args, env=self.plan.env, cwd=self.plan.cwd
            )
            return stdio_client(params, errlog=self.errlog)
        from mcp.client.streamable_http import streamable_http_client

        from .pinned import pinned_client

        assert self.target is not None  # checked by the guard before the loop saw it
        client = pinned_client(self.target, self.plan.headers, config.timeout_seconds)
        stack.push_async_callback(client.aclose)
        return streamable_http_client(str(self.target.url), http_client=client)

    async def _on_message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ToolListChangedNotification):
            self.tools_stale = True

    async def refresh_tools(self) -> None:
        if self.session is not None:
            self.tools_stale = False
            self.tools = await _list_tools(self.session)

    async def close(self) -> None:
        if self.stop_event is not None:
            self.stop_event.set()
        if self.task is not None and not self.task.done():
            try:
                # A session that never finished its handshake has nothing to close politely.
                grace = 10.0 if self.session is not None else 0.0
                await asyncio.wait_for(asyncio.shield(self.task), grace)
            except BaseException:
                self.task.cancel()
                with contextlib.suppress(BaseException):
                    await self.task
        # The stderr file stays open for the failure's tail; it closes with the connection.

    def trim_stderr(self) -> None:
        """Keep a chatty server's stderr file small: only its tail matters."""
        if self.errlog is None or self.errlog.closed:
            return
        with contextlib.suppress(OSError):
            fd = self.errlog.fileno()
            size = os.fstat(fd).st_size
            if size > STDERR_KEEP_BYTES:
                tail = os.pread(fd, STDERR_TAIL_BYTES, size - STDERR_TAIL_BYTES)
                os.ftruncate(fd, 0)
                os.write(fd, tail)

    def stderr_tail(self) -> str:
        if self.errlog is None or self.errlog.closed:
            return ""
        try:
            fd = self.errlog.fileno()
            size = os.fstat(fd).st_size
            raw = os.pread(fd, STDERR_TAIL_BYTES, max(0, size - STDERR_TAIL_BYTES))
        except OSError:
            return ""
        return raw.decode("utf-8", "replace").strip()


async def _list_tools(session: Any) -> list[Any]:
    from mcp import types

    tools: list[Any] = []
    cursor = None
    for _page in range(50):  # a server that pages forever must not hold the loop
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor:
            break
    return tools

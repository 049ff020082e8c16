"""The MCP client sessions of one worker process. The SDK is async (anyio) and our sessions are
sync threads, so one asyncio loop on a dedicated thread owns every client session; callers
submit work to it and wait with a timeout.

A server starts on first use and is reused by every session of its team in this process; it
stops when idle (a reaper thread), when its definition changes, and at exit. A server that
fails to start or dies is recorded as `failed` with its last error (and the tail of its
stderr); the next use restarts it, after a backoff that doubles with each failure in a row.

Status rows are written only from the calling (sync) threads: Django refuses database calls
from a thread that runs an event loop, and a caller's transaction must see its own write."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from django.db import close_old_connections

from openhive.core.errors import DomainError
from openhive.core.guards import ssrf
from openhive.core.scrubbing import get_scrubber

from .connection import START_TIMEOUT_SECONDS, Connection
from .servers import ServerPlan

logger = logging.getLogger("openhive.tools.mcp")

MAX_BACKOFF_SECONDS = 60.0
REAP_INTERVAL_SECONDS = 5.0


class McpUnavailable(DomainError):
    code = "mcp_server_unavailable"


class McpCallFailed(DomainError):
    code = "mcp_call_failed"


class McpTimeout(DomainError):
    code = "timeout"


# (plan, state, tools, error): how the manager reports a change; `source.py` writes the row.
StatusHook = Callable[[ServerPlan, str, "list[dict] | None", "str | None"], None]


class McpManager:
    """Every MCP server this process runs, by (team id, server name)."""

    def __init__(self, on_status: StatusHook) -> None:
        self._on_status = on_status
        self._lock = threading.Lock()
        self._pid = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conns: dict[tuple[int, str], Connection] = {}
        self._key_locks: dict[tuple[int, str], threading.Lock] = {}
        # key -> (failures in a row, monotonic time of the last, error)
        self._failures: dict[tuple[int, str], tuple[int, float, str]] = {}

    # --- the loop thread -------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid():
                # A forked worker: the parent's loop thread and servers are not ours.
                self._pid = os.getpid()
                self._conns, self._key_locks, self._failures = {}, {}, {}
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._loop.run_forever, name="mcp-client-loop", daemon=True
                ).start()
                threading.Thread(target=self._reaper, name="mcp-idle-reaper", daemon=True).start()
            assert self._loop is not None
            return self._loop

    def _submit(self, coro: Any, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpTimeout(f"no answer within {timeout:g} s") from None

    def _key_lock(self, key: tuple[int, str]) -> threading.Lock:
        # The loop first: starting it (in a new process) clears the locks of the old one.
        self._ensure_loop()
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    # --- what callers use ------------------------------------------------------------------

    def running(self, plan: ServerPlan) -> Connection | None:
        conn = self._conns.get(plan.key) if self._pid == os.getpid() else None
        if conn is not None and conn.alive and conn.plan.fingerprint == plan.fingerprint:
            return conn
        return None

    def tools(self, plan: ServerPlan, *, start: bool = True) -> list[Any] | None:
        """The server's tools: from the live session (refreshed if the server said they
        changed), or by starting it when `start`; None if it is not running and not started."""
        conn = self.running(plan)
        if conn is None:
            if not start:
                return None
            conn = self.ensure(plan)
        if conn.tools_stale:
            try:
                self._submit(conn.refresh_tools(), plan.config.timeout_seconds)
            except McpTimeout:
                return conn.tools  # the old list still serves; refreshed on the next ask
            except Exception as exc:
                self._drop(plan, conn, _stopped_error(plan, conn, exc))
            self._on_status(plan, "running", _tool_rows(conn.tools), None)
        return conn.tools

    def ensure(self, plan: ServerPlan) -> Connection:
        with self._key_lock(plan.key):
            conn = self.running(plan)
            if conn is not None:
                return conn
            stale = self._conns.pop(plan.key, None)
            if stale is not None:  # died, or its definition changed
                self._close(stale)
            self._check_backoff(plan)
            target = None
            if plan.config.url:
                try:
                    target = ssrf.check_url(plan.config.url, allow=_ssrf_allow())
                except DomainError as exc:
                    self._failed(plan, exc.message)
                    raise
            conn = Connection(plan, target)
            try:
                self._submit(conn.open(), START_TIMEOUT_SECONDS + 5)
            except BaseException as exc:
                error = _describe_start_failure(plan, exc, conn.stderr_tail())
                self._failed(plan, error)
                raise McpUnavailable(error) from None
            self._conns[plan.key] = conn
            self._failures.pop(plan.key, None)
            self._on_status(plan, "running", _tool_rows(conn.tools), None)
            return conn

    def call(self, plan: ServerPlan, tool: str, arguments: dict) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        conn = self.ensure(plan)
        conn.last_used = time.monotonic()
        timeout = plan.config.timeout_seconds
        try:
            return self._submit(
                conn.session.call_tool(tool, arguments, read_timeout_seconds=timeout), timeout + 2
            )
        except McpTimeout:
            raise McpTimeout(
                f'MCP server "{plan.name}" gave no answer to {tool} within {timeout:g} s '
                "(mcp_servers.<name>.timeout_seconds)"
            ) from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise McpTimeout(
                    f'MCP server "{plan.name}" gave no answer to {tool} within {timeout:g} s'
                ) from None
            if exc.code != CONNECTION_CLOSED and conn.alive:
                raise McpCallFailed(
                    f'MCP server "{plan.name}" refused {tool}: {exc.message}'
                ) from None
            error = _stopped_error(plan, conn)
        except Exception as exc:  # the transport broke under the call
            error = _stopped_error(plan, conn, exc)
        finally:
            conn.last_used = time.monotonic()
            conn.trim_stderr()
        self._drop(plan, conn, error)

    def reap_idle(self, now: float | None = None) -> list[ServerPlan]:
        """Stop every server unused for longer than its `idle_seconds`."""
        now = time.monotonic() if now is None else now
        stopped = []
        for key, conn in list(self._conns.items()):
            if now - conn.last_used < conn.plan.config.idle_seconds:
                continue
            with self._key_lock(key):
                if self._conns.get(key) is conn and now - conn.last_used >= (
                    conn.plan.config.idle_seconds
                ):
                    del self._conns[key]
                    self._close(conn)
                    self._on_status(conn.plan, "stopped", None, None)
                    stopped.append(conn.plan)
        return stopped

    def shutdown(self) -> None:
        """Stop every server of this process (at exit; tests between cases)."""
        if self._pid != os.getpid() or self._loop is None:
            return
        self._failures.clear()
        for key in list(self._conns):
            conn = self._conns.pop(key, None)
            if conn is not None:
                self._close(conn)

    # --- inside ----------------------------------------------------------------------------

    def _drop(self, plan: ServerPlan, conn: Connection, error: str) -> NoReturn:
        """A server that stopped under us: forget it, record why, tell the caller."""
        with self._lock:
            if self._conns.get(plan.key) is conn:
                del self._conns[plan.key]
        self._close(conn)
        self._failed(plan, error)
        raise McpUnavailable(error)

    def _close(self, conn: Connection) -> None:
        try:
            self._submit(conn.close(), 15)
        except Exception:
            logger.warning(
                "MCP server %s of team %s did not stop cleanly", conn.plan.name, conn.plan.team_name
            )

    def _check_backoff(self, plan: ServerPlan) -> None:
        failed = self._failures.get(plan.key)
        if failed is None:
            return
        count, at, error = failed
        wait = min(MAX_BACKOFF_SECONDS, 2.0 ** (count - 1)) - (time.monotonic() - at)
        if wait > 0:
            raise McpUnavailable(
                f"{error} (failed {count} time(s) in a row; next start attempt in {wait:.1f} s)"
            )

    def _failed(self, plan: ServerPlan, error: str) -> None:
        count = self._failures.get(plan.key, (0, 0.0, ""))[0] + 1
        self._failures[plan.key] = (count, time.monotonic(), error)
        logger.warning("MCP server %s of team %s failed: %s", plan.name, plan.team_name, error)
        self._on_status(plan, "failed", None, error)

    def _reaper(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            time.sleep(REAP_INTERVAL_SECONDS)
            try:
                if self._conns:
                    self.reap_idle()
            except Exception:
                logger.exception("stopping idle MCP servers failed")
            finally:
                close_old_connections()


def _tool_rows(tools: list[Any]) -> list[dict]:
    return [
        {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
        for t in tools
    ]


def _ssrf_allow() -> frozenset[tuple[str, int]]:
    from openhive.tools.webfetch import ssrf_allow

    return ssrf_allow()


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe_start_failure(plan: ServerPlan, exc: BaseException, stderr: str) -> str:
    exc = _leaf(exc)
    what = f'MCP server "{plan.name}" could not start'
    if isinstance(exc, FileNotFoundError):
        reason = f'command "{plan.config.command}" not found (installed, and on PATH?)'
    elif isinstance(exc, PermissionError):
        reason = f'command "{plan.config.command}" is not executable'
    elif isinstance(exc, (asyncio.TimeoutError, McpTimeout)):
        reason = f"no handshake within {START_TIMEOUT_SECONDS:g} s"
    elif type(exc).__name__ == "MCPError" and "closed" in str(exc).lower():
        reason = "the server closed the connection during the handshake (it exited?)"
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return _with_stderr(plan, f"{what}: {reason}", stderr)


def _stopped_error(plan: ServerPlan, conn: Connection, exc: BaseException | None = None) -> str:
    why = f" ({type(_leaf(exc)).__name__}: {_leaf(exc)})" if exc is not None else ""
    return _with_stderr(
        plan,
        f'MCP server "{plan.name}" stopped while answering{why}; it is restarted on the next use',
        conn.stderr_tail(),
    )


def _with_stderr(plan: ServerPlan, message: str, stderr: str) -> str:
    if stderr:
        lines = stderr.splitlines()[-5:]
        message += ". Its last output: " + " | ".join(line.strip() for line in lines)[-600:]
    # A server may print its environment or a header: no secret goes on.
    return get_scrubber().with_extra(plan.secrets).text(message)


_manager: McpManager | None = None
_manager_lock = threading.Lock()


def get_manager(on_status: StatusHook) -> McpManager:
    global _manager
    with _manager_lock:
        if _manager is None:
            _manager = McpManager(on_status)
            atexit.register(_manager.shutdown)
        return _manager

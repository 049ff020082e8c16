"""The browser of one worker process: a dedicated thread owns Playwright, one Chromium and one
context per team; tool calls from session threads are marshalled to it.

Why a thread: Playwright's sync API is bound to the thread that started it and cannot run
inside an asyncio loop, while sessions run in many threads. Everything browser-side runs here,
one action at a time, each bounded by the team's `timeout_ms`.

Lifecycle: the browser starts with the first call; a team's context closes after
`BROWSER_IDLE_SECONDS` without a call (or on `browser_close`); at most `BROWSER_MAX_CONTEXTS`
live at once (the least recently used one is closed to make room); with no context left the
browser itself is closed; and everything is closed when the worker process exits."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from django.conf import settings

from openhive.core.errors import DomainError

from .browserpage import TeamBrowser
from .browserrouting import Policy

logger = logging.getLogger(__name__)

# Debian's Chromium, as the tests use it; the proxy that does not exist is the backstop of the
# request routing (see browserrouting), the WebRTC policy keeps UDP off the network.
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--dns-prefetch-disable",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
]
_STOP = object()


def chromium_path() -> str | None:
    configured = settings.OPENHIVE.get("BROWSER_EXECUTABLE") or ""
    if configured:
        return configured if os.path.exists(configured) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserManager:
    def __init__(
        self,
        *,
        max_contexts: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_contexts = max(1, max_contexts)
        self.idle_seconds = idle_seconds
        self.clock = clock
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._teams: dict[str, TeamBrowser] = {}
        self._playwright: Any = None
        self._browser: Any = None
        self.launches = 0  # how many times Chromium was started (tests, the benchmark)
        self._empty_since: float | None = None

    # --- the calling side ---------------------------------------------------------------------

    def run(
        self,
        team: str,
        policy: Policy,
        action: Callable[[TeamBrowser], dict],
        *,
        create: bool = True,
    ) -> tuple[dict, set[str]]:
        """Run `action` on `team`'s browser, on the browser thread. Returns its result and the
        secrets typed into this team's pages so far (for the caller's scrubber)."""
        future: Future = Future()
        self._start()
        self._jobs.put((team, policy, action, create, future))
        # The action is bounded by the team's timeout; this wait only guards a stuck browser
        # (or a queue of other teams' actions ahead of this one).
        try:
            return future.result(timeout=policy.timeout_ms / 1000 * 4 + 30)
        except FutureTimeout:
            future.cancel()
            raise DomainError(
                "the browser did not answer in time (it may be busy with other teams' pages); "
                "try again",
                code="timeout",
            ) from None

    def close_team(self, team: str) -> bool:
        """Close `team`'s context now; True if it had one."""
        if self._thread is None:
            return False
        return self._call(lambda: self._close(team))

    def reap(self) -> list[str]:
        """Close the contexts idle for longer than the idle time now (the thread also does it
        by itself); returns the teams whose context was closed."""
        if self._thread is None:
            return []
        return self._call(self._reap)

    def post(self, func: Callable[[], Any]) -> None:
        """Run `func` on the browser thread soon, without waiting for it (WebSocket relays)."""

        def quietly() -> None:
            with contextlib.suppress(Exception):  # the page or its socket may be gone by now
                func()

        if self._thread is not None:
            self._jobs.put((None, None, quietly, False, Future()))

    def live_teams(self) -> list[str]:
        return sorted(self._teams)

    def shutdown(self, timeout: float = 15.0) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None or not thread.is_alive():
            return
        self._jobs.put(_STOP)
        thread.join(timeout)

    def _call(self, func: Callable[[], Any]) -> Any:
        future: Future = Future()
        self._start()
        self._jobs.put((None, None, func, False, future))
        return future.result(timeout=60)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="openhive-browser", daemon=True
                )
                self._thread.start()

    # --- the browser thread -------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                try:
                    job = self._jobs.get(timeout=self._tick())
                except queue.Empty:
                    self._reap()
                    continue
                if job is _STOP:
                    break
                self._serve(job)
                self._reap()
        finally:
            self._stop_browser()

    def _tick(self) -> float:
        return max(0.5, min(self.idle_seconds / 4, 30.0))

    def _serve(self, job: tuple) -> None:
        team, policy, action, create, future = job
        if not future.set_running_or_notify_cancel():
            return
        try:
            if team is None:
                future.set_result(action())
                return
            browser = self._team(team, policy, create=create)
            result = action(browser)
            browser.last_used = self.clock()
            future.set_result((result, set(browser.secrets)))
        except DomainError as exc:
            future.set_exception(exc)
        except Exception as exc:
            logger.exception("browser action of team %s failed", team)
            if self._browser is not None and not self._browser.is_connected():
                self._forget_browser()
            future.set_exception(exc)

    def _team(self, team: str, policy: Policy, *, create: bool) -> TeamBrowser:
        existing = self._teams.get(team)
        if existing is not None:
            existing.apply(policy)
            return existing
        if not create:
            raise DomainError(
                "your browser is not open (it closes after a while without use); call "
                "browser_navigate to open a page",
                code="no_page",
            )
        while len(self._teams) >= self.max_contexts:
            oldest = min(self._teams, key=lambda name: self._teams[name].last_used)
            logger.info("browser: closing the context of %s to make room", oldest)
            self._close(oldest)
        browser = TeamBrowser(
            self._launch(), Policy(**vars(policy)), now=self.clock(), post=self.post
        )
        self._teams[team] = browser
        self._empty_since = None
        return browser

    def _launch(self) -> Any:
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        self._forget_browser()
        executable = chromium_path()
        if executable is None:
            raise DomainError(
                "the browser is not installed on this server (Chromium is missing); ask the "
                "operator to install it (apt-get install chromium) or set "
                "OPENHIVE_BROWSER_EXECUTABLE",
                code="browser_unavailable",
            )
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(
            executable_path=executable, args=LAUNCH_ARGS, downloads_path=None
        )
        self.launches += 1
        return self._browser

    def _close(self, team: str) -> bool:
        browser = self._teams.pop(team, None)
        if browser is None:
            return False
        browser.close()
        if not self._teams:
            self._empty_since = self.clock()
        return True

    def _reap(self) -> list[str]:
        now = self.clock()
        idle = [n for n, b in self._teams.items() if now - b.last_used > self.idle_seconds]
        for name in idle:
            self._close(name)
        # Chromium itself stays a while after its last context (a new one then costs
        # ~0.2 s instead of a launch), then goes too.
        empty = self._empty_since
        idle_browser = empty is not None and now - empty > self.idle_seconds
        if self._browser is not None and not self._teams and idle_browser:
            self._stop_browser()
        return idle

    def _stop_browser(self) -> None:
        for name in list(self._teams):
            self._teams.pop(name).close()
        try:
            if self._browser is not None:
                self._browser.close()
        except Exception:
            pass
        try:
            if self._playwright is not None:
                self._playwright.stop()
        except Exception:
            pass
        self._browser = self._playwright = None
        self._empty_since = None

    def _forget_browser(self) -> None:
        self._teams.clear()
        self._stop_browser()


_managers: dict[int, BrowserManager] = {}
_managers_lock = threading.Lock()


def browser_manager() -> BrowserManager:
    """This process's manager (a forked worker gets its own: threads do not survive a fork)."""
    pid = os.getpid()
    with _managers_lock:
        manager = _managers.get(pid)
        if manager is None:
            _managers.clear()
            manager = BrowserManager(
                max_contexts=settings.OPENHIVE.get("BROWSER_MAX_CONTEXTS", 4),
                idle_seconds=settings.OPENHIVE.get("BROWSER_IDLE_SECONDS", 300),
            )
            _managers[pid] = manager
            atexit.register(manager.shutdown)
    return manager

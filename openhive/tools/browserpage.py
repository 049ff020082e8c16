"""One team's browser: its own Playwright context (cookies, storage, history and cache belong
to this team alone), its pages, and the actions the browser tools perform. Runs only on the
browser thread (`browsermanager`); nothing here touches the database."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from openhive.core.errors import DomainError

from .browserrouting import Policy, Router, RoutingLog, check

MAX_SNAPSHOT_CHARS = 60_000
# Marks an element that received a vault secret: masked in screenshots.
SECRET_MARK = "data-openhive-secret"
SETTLE_MS = 50
MAX_PAGES = 8
VIEWPORT = {"width": 1280, "height": 900}
# Run in every page before its own scripts. WebRTC opens UDP sockets that no request routing
# sees: the page never gets it.
_INIT_SCRIPT = """
(() => {
  // Counts the windows this page asked for, so an action knows to wait for its popup.
  let opened = 0;
  const open = window.open;
  window.open = function (...args) { opened++; return open.apply(this, args); };
  document.addEventListener("click", event => {
    const link = event.target && event.target.closest && event.target.closest("a[target]");
    if (link && !["", "_self", "_parent", "_top"].includes(link.target)) opened++;
  }, true);
  Object.defineProperty(window, "__openhivePopups", {get: () => opened});
})();
for (const name of ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel"]) {
  try { delete window[name]; } catch (e) {}
  try { Object.defineProperty(window, name, {value: undefined}); } catch (e) {}
}
"""
_REF = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class TeamBrowser:
    def __init__(self, browser: Any, policy: Policy, *, now: float, post: Any = None) -> None:
        self.policy = policy
        self.log = RoutingLog()
        self.router = Router(
            policy,
            self.log,
            lambda frame: frame.parent_frame is None,
            post=post,
            origin=self._origin,
        )
        self.context = browser.new_context(
            service_workers="block",
            accept_downloads=False,
            viewport=VIEWPORT,
            java_script_enabled=True,
        )
        self.context.add_init_script(_INIT_SCRIPT)
        self.context.route("**/*", self.router.handle)
        self.context.route_web_socket(re.compile(r".*"), self.router.handle_websocket)
        self.context.on("page", self._opened)
        self.pages: list[Any] = []
        self.popups: list[Any] = []
        self.downloads: list[str] = []
        self.secrets: set[str] = set()
        self.last_used = now
        self.apply(policy)

    def apply(self, policy: Policy) -> None:
        self.policy.allowed_domains = list(policy.allowed_domains)
        self.policy.timeout_ms = policy.timeout_ms
        self.context.set_default_timeout(policy.timeout_ms)
        self.context.set_default_navigation_timeout(policy.timeout_ms)

    def _origin(self) -> str | None:
        if not self.pages:
            return None
        scheme, _, rest = self.pages[-1].url.partition("://")
        return f"{scheme}://{rest.split('/', 1)[0]}" if scheme in ("http", "https") else None

    def close(self) -> None:
        self.router.close()
        # The browser may already be gone; then nothing is left to free.
        with contextlib.suppress(Exception):
            self.context.close()

    # --- pages --------------------------------------------------------------------------------

    def _opened(self, page: Any) -> None:
        if self.pages:  # the first page is ours; later ones were opened by a page
            self.popups.append(page)
        self.pages.append(page)
        # A page that keeps opening windows must not grow the browser without bound.
        while len(self.pages) > MAX_PAGES:
            with contextlib.suppress(Exception):
                self.pages.pop(0).close()
        page.on("close", lambda p: self.pages.remove(p) if p in self.pages else None)
        page.on("download", self._download)

    def _download(self, download: Any) -> None:
        self.downloads.append(download.url)
        with contextlib.suppress(Exception):
            download.cancel()

    def page(self, *, create: bool = False) -> Any:
        if self.pages:
            return self.pages[-1]
        if not create:
            raise DomainError(
                "no page is open in your browser; call browser_navigate first",
                code="no_page",
            )
        return self.context.new_page()

    # --- actions ------------------------------------------------------------------------------

    def navigate(self, url: str) -> dict:
        check(url, self.policy)  # a clear refusal before the browser is involved at all
        page = self.page(create=True)
        self._goto(page, url)
        return self.state()

    def snapshot(self) -> dict:
        page = self.page()
        text = page.aria_snapshot(mode="ai", timeout=self.policy.timeout_ms)
        truncated = len(text) > MAX_SNAPSHOT_CHARS
        return {
            **self.state(),
            "snapshot": text[:MAX_SNAPSHOT_CHARS],
            "truncated": truncated,
        }

    def click(self, ref: str) -> dict:
        locator = self._element(ref)
        popups = self._popups_asked()
        _act(lambda: locator.click(timeout=self.policy.timeout_ms), ref)
        self._settle(popups)
        return self.state()

    def type(self, ref: str, text: str, *, submit: bool, secrets: list[str]) -> dict:
        locator = self._element(ref)
        _act(lambda: locator.fill(text, timeout=self.policy.timeout_ms), ref)
        if secrets:
            self.secrets.update(secrets)
            with contextlib.suppress(Exception):  # a field the page removed at once
                locator.evaluate(f"e => e.setAttribute({SECRET_MARK!r}, '')")
        if submit:
            popups = self._popups_asked()
            _act(lambda: locator.press("Enter", timeout=self.policy.timeout_ms), ref)
            self._settle(popups)
        return self.state()

    def screenshot(self, path: Path, *, full_page: bool) -> dict:
        page = self.page()
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(
            path=str(path),
            full_page=full_page,
            mask=[page.locator(f"[{SECRET_MARK}]")],
            timeout=self.policy.timeout_ms,
        )
        return {**self.state(), "bytes": path.stat().st_size}

    def go_back(self) -> dict:
        return self._history(self.page().go_back, "back")

    def go_forward(self) -> dict:
        return self._history(self.page().go_forward, "forward")

    def _history(self, move: Any, direction: str) -> dict:
        self.log.redirect = None
        try:
            response = move(wait_until="load", timeout=self.policy.timeout_ms)
        except Exception as exc:
            if self.log.redirect is None:
                raise self._navigation_error(exc, "") from None
            response = True
        self._settle()
        state = self.state()
        if response is None:
            state["note"] = f"there is no page to go {direction} to; the page did not change"
        return state

    # --- helpers ------------------------------------------------------------------------------

    def _element(self, ref: str) -> Any:
        ref = ref.strip().strip("[]").removeprefix("ref=")
        if not _REF.match(ref):
            raise DomainError(f"{ref!r} is not an element ref (e.g. e12)", code="invalid_ref")
        locator = self.page().locator(f"aria-ref={ref}")
        try:
            found = locator.count()
        except Exception:
            found = 0
        if not found:
            raise DomainError(
                f"no element with ref {ref} on the current page; refs come from the latest "
                "browser_snapshot: take a new one",
                code="ref_not_found",
            )
        return locator

    def _goto(self, page: Any, url: str) -> None:
        for _hop in range(6):
            self.log.redirect = None
            try:
                page.goto(url, wait_until="load", timeout=self.policy.timeout_ms)
                return
            except Exception as exc:
                if self.log.redirect is None:
                    raise self._navigation_error(exc, url) from None
                url = self.log.redirect  # checked by the routing; the page goes there itself
        raise DomainError("too many redirects (more than 5)", code="too_many_redirects")

    def _popups_asked(self) -> int:
        with contextlib.suppress(Exception):
            return int(self.page().evaluate("window.__openhivePopups || 0"))
        return 0

    def _settle(self, popups_before: int | None = None) -> None:
        """After an action that may navigate or open a window: wait for the page (a popup
        the action asked for, then its load), and follow a redirect the routing handed back."""
        pages = len(self.pages)
        # The events of the browser are only handled while we wait on Playwright: give a
        # navigation or popup the action started a moment to be announced.
        with contextlib.suppress(Exception):
            self.page().wait_for_timeout(SETTLE_MS)
        if popups_before is not None and len(self.pages) == pages:
            with contextlib.suppress(Exception):
                if self._popups_asked() > popups_before and len(self.pages) == pages:
                    self.context.wait_for_event("page", timeout=self.policy.timeout_ms)
        # A page that never finishes loading is still a page the model can read.
        with contextlib.suppress(Exception):
            self.page().wait_for_load_state("load", timeout=self.policy.timeout_ms)
        if self.log.redirect is not None:
            self._goto(self.page(), self.log.redirect)

    def _navigation_error(self, exc: Exception, url: str) -> DomainError:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        blocked = [b for b in self.log.blocked if b["kind"] == "document"]
        if "Download is starting" in message or (self.downloads and url in self.downloads):
            return DomainError(
                f"{url} is a download; downloads are disabled in the browser (use web_fetch "
                "to read a file)",
                code="download_blocked",
            )
        if blocked:
            return DomainError(blocked[-1]["reason"], code="blocked")
        if "Timeout" in message:
            return DomainError(
                f"the page did not load within {self.policy.timeout_ms} ms", code="timeout"
            )
        return DomainError(f"the navigation failed: {message}", code="navigation_failed")

    def state(self) -> dict:
        page = self.page()
        try:
            title = page.title()
        except Exception:
            title = ""
        state: dict = {"url": page.url, "title": title}
        blocked = self.log.take()
        if blocked:
            state["blocked_requests"] = blocked
        if self.popups:
            state["opened_pages"] = [p.url for p in self.popups]
            self.popups = []
            state["note"] = "the page opened a new page; the browser tools now act on it"
        if self.downloads:
            state["downloads_refused"], self.downloads = self.downloads, []
        return state


def _act(action: Any, ref: str) -> None:
    try:
        action()
    except DomainError:
        raise
    except Exception as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DomainError(
            f"could not act on element {ref}: {message}", code="action_failed"
        ) from None

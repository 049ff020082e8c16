"""The browser's request routing: every request a page makes goes through the SSRF guard and
the team's `browser.allowed_domains`, and is then sent by us, not by Chromium.

Why we send it ourselves: the guard resolves a name and checks every address, but Chromium
would resolve the name again when it connects (a DNS-rebinding window), and Chromium follows
the redirects of a request it sent without asking the route again. So each HTTP(S) request is
fetched here through the pinned transport (the connection goes to the checked address only),
redirects are followed by hand with every hop checked, and the answer is fulfilled into the
page. Chromium itself is launched with a proxy that does not exist: anything that ever escaped
the routing (a preconnect, a request type Playwright does not route) fails instead of reaching
the network.

A main-frame navigation that redirects is not followed here: the page must end up at the final
URL (relative links, history), so the hop is checked and handed back to the page
(`RoutingLog.redirect`), which navigates there itself — through this routing again."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from openhive.core.errors import DomainError
from openhive.core.guards import ssrf

from .webfetch import send_pinned, ssrf_allow

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
MAX_RESPONSE_BYTES = 20 * 1024 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Set by the transport for the hop it sends, or meaningless once we decoded the body.
_DROP_REQUEST = frozenset(
    {"host", "content-length", "connection", "accept-encoding", "transfer-encoding", "upgrade"}
)
_DROP_RESPONSE = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection"}
)
# Schemes that never touch the network.
_LOCAL_SCHEMES = ("data:", "blob:", "about:")


@dataclass
class RoutingLog:
    """What the routing did during one browser action: refused requests, and a checked
    main-frame redirect the page still has to follow."""

    blocked: list[dict] = field(default_factory=list)
    redirect: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refuse(self, url: str, reason: str, kind: str) -> None:
        with self.lock:
            if len(self.blocked) < 50:
                self.blocked.append({"url": url[:500], "kind": kind, "reason": reason})

    def take(self) -> list[dict]:
        with self.lock:
            blocked, self.blocked = self.blocked, []
        return blocked


@dataclass
class Policy:
    """The team's current browser settings (updated on every call: a config change applies
    to the next request, not only to a new context)."""

    allowed_domains: list[str]
    timeout_ms: int


def check(url: str, policy: Policy) -> ssrf.Target:
    return ssrf.check_url(url, allow=ssrf_allow(), allowed_domains=policy.allowed_domains)


class Router:
    """`context.route("**/*", router.handle)` and `context.route_web_socket(...)`."""

    def __init__(
        self,
        policy: Policy,
        log: RoutingLog,
        is_main_frame: Callable[[Any], bool],
        *,
        post: Callable[[Callable[[], Any]], None] | None = None,
        origin: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.policy, self.log, self.is_main_frame = policy, log, is_main_frame
        # `post(func)` runs func on the browser thread (WebSocket deliveries).
        self.post, self.origin = post, origin
        self.relays: list[Any] = []

    def handle(self, route: Any) -> None:
        # The page (or the whole context) may close while a request is in flight; then the
        # route can no longer be answered, and that is no error of ours.
        with contextlib.suppress(Exception):
            self._handle(route)

    def _handle(self, route: Any) -> None:
        request = route.request
        url = request.url
        if url.startswith(_LOCAL_SCHEMES):
            route.continue_()
            return
        kind = request.resource_type
        try:
            main = request.is_navigation_request() and self._main_frame(request)
            status, headers, body = self._fetch(request, main)
        except _MainRedirect as hop:
            self.log.redirect = hop.url
            route.abort("aborted")
            return
        except DomainError as exc:
            self.log.refuse(url, exc.message, kind)
            route.abort("blockedbyclient" if exc.code in _GUARD_CODES else "failed")
            return
        except Exception as exc:  # a transport failure: the page sees a network error
            self.log.refuse(url, f"request failed: {type(exc).__name__}", kind)
            route.abort("failed")
            return
        try:
            route.fulfill(status=status, headers=headers, body=body)
        except Exception as exc:  # an answer Chromium refuses: the page sees a network error
            logger.info("browser: could not hand %s to the page: %s", url[:200], exc)
            route.abort("failed")

    def _main_frame(self, request: Any) -> bool:
        try:
            return self.is_main_frame(request.frame)
        except Exception:  # a popup's first request comes before its frame: a new page
            return True

    def _fetch(self, request: Any, main: bool) -> tuple[int, dict[str, str], bytes]:
        deadline = time.monotonic() + self.policy.timeout_ms / 1000
        url: str | httpx.URL = request.url
        method = request.method
        body = request.post_data_buffer
        # What Chromium would send, cookies of this context included: with request
        # interception Chromium hands them over with the request (HttpOnly ones too), so the
        # round trip of `all_headers()` (~4 ms a request) is not needed. The cookie tests
        # (test_two_teams_never_share_cookies) guard this.
        headers = [
            (k, v)
            for k, v in request.headers.items()
            if not k.startswith(":") and k.lower() not in _DROP_REQUEST
        ]
        for _hop in range(MAX_REDIRECTS + 1):
            target = check(str(url), self.policy)
            response, data = _send(target, method, headers, body, deadline)
            location = response.headers.get("location")
            if response.status_code not in _REDIRECTS or not location:
                return response.status_code, _response_headers(response), data
            try:
                url = target.url.join(location)
            except (httpx.InvalidURL, ValueError):
                raise ssrf.SsrfBlocked(
                    f"blocked: redirect to an invalid location {location[:200]!r}"
                ) from None
            check(str(url), self.policy)  # refused here, before the page goes anywhere
            if main:
                raise _MainRedirect(str(url))
            if response.status_code == 303 or (
                response.status_code in (301, 302) and method == "POST"
            ):
                method, body = "GET", None
            # Cookies and credentials stay with the origin that was asked for.
            if (target.url.scheme, target.host, target.port) != _origin(url):
                headers = [(k, v) for k, v in headers if k.lower() not in _CREDENTIALS]
        raise DomainError(f"too many redirects (more than {MAX_REDIRECTS})", code="fetch_failed")

    def handle_websocket(self, ws: Any) -> None:
        """WebSockets pass the same guard; an allowed one is relayed by us to the checked
        address (`browserws`), so Chromium never opens a socket itself."""
        from .browserws import Relay

        url = ws.url
        http_url = "http" + url[2:] if url.startswith("ws") else url
        try:
            target = check(http_url, self.policy)
        except DomainError as exc:
            self.log.refuse(url, exc.message, "websocket")
            ws.close(code=1008, reason="blocked by the browser's network policy")
            return
        if self.post is None:
            ws.close(code=1011, reason="WebSockets are not available here")
            return
        self.relays = [r for r in self.relays if not r.closed.is_set()]
        self.relays.append(Relay(ws, target, self.origin(), self.post))

    def close(self) -> None:
        for relay in self.relays:
            relay.close()
        self.relays = []


class _MainRedirect(Exception):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


_GUARD_CODES = frozenset(
    {ssrf.SsrfBlocked.code, ssrf.DomainNotAllowed.code, ssrf.ResolutionFailed.code}
)
_CREDENTIALS = frozenset({"authorization", "cookie", "proxy-authorization"})


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    port = url.port or (443 if url.scheme == "https" else 80)
    return (url.scheme, url.host, port)


def _send(
    target: ssrf.Target,
    method: str,
    headers: list[tuple[str, str]],
    body: bytes | None,
    deadline: float,
) -> tuple[httpx.Response, bytes]:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DomainError("the request timed out", code="timeout")
    request = httpx.Request(
        method,
        target.url,
        headers=[*headers, ("Accept-Encoding", "gzip, deflate")],
        content=body,
        extensions={"timeout": httpx.Timeout(remaining).as_dict()},
    )
    response, data, truncated = send_pinned(
        target, request, max_bytes=MAX_RESPONSE_BYTES, deadline=deadline
    )
    if truncated:
        raise DomainError(
            f"the response from {target.host} is over {MAX_RESPONSE_BYTES} bytes",
            code="too_large",
        )
    return response, data


def _response_headers(response: httpx.Response) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        if key in _DROP_RESPONSE:
            continue
        # Playwright splits a joined set-cookie back into its cookies.
        headers[key] = f"{headers[key]}\n{value}" if key in headers else value
    return headers

"""The request side of web_fetch (see `web.py` for the tool): per hop the SSRF guard, the
rate-limit buckets and a request pinned to the checked address; redirects by hand."""

from __future__ import annotations

import functools
import threading
import time
from typing import TYPE_CHECKING

import httpx
from django.conf import settings

from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.guards import pinning, ssrf
from openhive.core.scrubbing import Scrubber
from teams.config import TeamConfig

from .services import BucketRule, ratelimit_take
from .webbody import read_body, render_body

if TYPE_CHECKING:
    from .web import WebFetchArgs

MAX_BODY_BYTES = 1024 * 1024
MAX_REDIRECTS = 5
_DEFAULT_AGENT = ("User-Agent", "OpenHive-web_fetch/1.0")
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@functools.lru_cache(maxsize=8)
def _allow(entries: tuple[str, ...]) -> frozenset[tuple[str, int]]:
    return ssrf.parse_allow(entries)


def ssrf_allow() -> frozenset[tuple[str, int]]:
    return _allow(tuple(settings.OPENHIVE.get("SSRF_ALLOW") or ()))


_transport: pinning.PinnedTransport | None = None
_transport_lock = threading.Lock()


def transport() -> pinning.PinnedTransport:
    """One connection pool per process (building a TLS context costs milliseconds)."""
    global _transport
    with _transport_lock:
        if _transport is None:
            _transport = pinning.PinnedTransport()
        return _transport


def fetch(
    ctx: ToolContext,
    config: TeamConfig,
    args: WebFetchArgs,
    headers: list[tuple[str, str]],
    scrubber: Scrubber,
) -> dict:
    deadline = time.monotonic() + args.timeout_seconds
    url: str | httpx.URL = args.url
    method, body = args.method, args.body
    carried = list(headers)  # the caller's headers still sent on this hop
    hops: list[str] = []
    rate_key = args.rate_limit_key
    note = ""
    if rate_key and rate_key not in config.rate_limit_buckets:
        note = f"rate_limit_key {rate_key!r} is not configured for this team; not throttled"
        rate_key = None
    previous: ssrf.Target | None = None
    for _hop in range(MAX_REDIRECTS + 1):
        target = ssrf.check_url(url, allow=ssrf_allow(), allowed_domains=config.web.allowed_domains)
        if previous is not None and _origin(previous) != _origin(target):
            carried = [(k, v) for k, v in carried if not _is_credential(k, v, scrubber)]
        _charge(ctx, config, target.host, rate_key)
        rate_key = None  # the named bucket pays for the request once, not for every hop
        response, data, truncated = _send(target, method, carried, body, deadline)
        location = response.headers.get("location")
        if response.status_code in _REDIRECTS and location:
            hops.append(str(target.url))
            try:
                url = target.url.join(location)
            except (httpx.InvalidURL, ValueError):
                raise ssrf.SsrfBlocked(
                    f"blocked: redirect to an invalid location {location[:200]!r}"
                ) from None
            if response.status_code == 303 or (
                response.status_code in (301, 302) and method == "POST"
            ):
                method, body = "GET", None
            previous = target
            continue
        return _result(target, response, data, truncated, args.raw, hops, note, scrubber)
    raise DomainError(
        f"too many redirects (more than {MAX_REDIRECTS}); last hop: {hops[-1]}",
        code="too_many_redirects",
    )


def _origin(target: ssrf.Target) -> tuple[str, str, int]:
    return (target.url.scheme, target.host, target.port)


def _is_credential(name: str, value: str, scrubber: Scrubber) -> bool:
    # `scrubber` knows the vault values this call resolved, so a header that carried one
    # counts as a credential whatever its name.
    return name.lower() in _CREDENTIAL_HEADERS or scrubber.values(value)[1] > 0


def _charge(ctx: ToolContext, config: TeamConfig, host: str, key: str | None) -> None:
    rules = [
        BucketRule(name, bucket.rps, bucket.burst)
        for name, bucket in sorted(config.rate_limit_buckets.items())
        if name == key or (bucket.domain and ssrf.host_matches(host, [bucket.domain]))
    ]
    decision = ratelimit_take(team=ctx.team, rules=rules)
    if not decision.allowed:
        rule = decision.rule
        seconds = decision.retry_after_ms / 1000
        raise DomainError(
            f"rate limit {decision.bucket!r} ({rule.rps:g}/s, burst {rule.burst:g}) has no "
            f"token left: nothing was sent. Retry in {seconds:.3f} s "
            f"(retry_after_ms={decision.retry_after_ms}).",
            code="rate_limited",
        )


def _send(
    target: ssrf.Target,
    method: str,
    headers: list[tuple[str, str]],
    body: str | None,
    deadline: float,
) -> tuple[httpx.Response, bytes, bool]:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DomainError("the request timed out", code="timeout")
    request = httpx.Request(
        method,
        target.url,
        headers=[
            *([] if any(k.lower() == "user-agent" for k, _ in headers) else [_DEFAULT_AGENT]),
            ("Accept-Encoding", "gzip, deflate"),  # only encodings read_body can bound
            *headers,
        ],
        content=body.encode("utf-8") if body is not None else None,
        extensions={"timeout": httpx.Timeout(remaining).as_dict()},
    )
    return send_pinned(target, request, max_bytes=MAX_BODY_BYTES, deadline=deadline)


def send_pinned(
    target: ssrf.Target, request: httpx.Request, *, max_bytes: int, deadline: float
) -> tuple[httpx.Response, bytes, bool]:
    """Send `request` to the address the guard checked (never a second DNS answer) and read
    its body up to `max_bytes` before `deadline`: web_fetch and the browser's routed requests
    both go out this way."""
    try:
        with pinning.pinned(target):
            response = transport().handle_request(request)
            try:
                data, truncated = read_body(response, max_bytes, deadline, request.method)
            finally:
                response.close()
    except httpx.TimeoutException:
        raise DomainError(f"the request to {target.host} timed out", code="timeout") from None
    except httpx.HTTPError as exc:
        raise DomainError(
            f"the request to {target.host} failed: {exc or type(exc).__name__}",
            code="fetch_failed",
        ) from None
    return response, data, truncated


def _result(
    target: ssrf.Target,
    response: httpx.Response,
    data: bytes,
    truncated: bool,
    raw: bool,
    hops: list[str],
    note: str,
    scrubber: Scrubber,
) -> dict:
    content_type = response.headers.get("content-type", "")
    text, form = render_body(data, content_type, raw=raw)
    text, _ = scrubber.values(text)
    result: dict = {
        "status": response.status_code,
        "ok": response.status_code < 400,
        "url": str(target.url),
        "content_type": content_type,
        "headers": {k: scrubber.values(v)[0] for k, v in response.headers.items()},
        "body": text,
        "format": form,
        "bytes": len(data),
        "truncated": truncated,
    }
    if hops:
        result["redirects"] = hops
    if note:
        result["note"] = note
    return result

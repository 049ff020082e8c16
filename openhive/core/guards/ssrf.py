"""The SSRF guard shared by everything that makes a request on a team's behalf (web_fetch, the
browser's request routing, MCP HTTP servers).

`check_url` decides; nothing in it connects anywhere. It refuses schemes other than http/https,
userinfo, malformed hosts and `localhost` names; reads every numeric IPv4 spelling the way a
resolver would (`127.1`, `0x7f.1`, `2130706433`, `0177.0.0.1`); resolves a host name exactly
once; and refuses the destination if ANY address is not global (the IPv4 forms embedded in
IPv6 — mapped, compatible, NAT64, 6to4, Teredo — are judged by their IPv4 address). The
result names the checked addresses; `openhive.core.guards.pinning` makes the connection go to
exactly those.

Operators exempt exact `host:port` destinations with OPENHIVE_SSRF_ALLOW (the address rule
only: scheme, userinfo and domain checks still apply)."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from openhive.core.errors import DomainError

if TYPE_CHECKING:
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Iterable[str]]
DNS_TIMEOUT_SECONDS = 5.0


class SsrfBlocked(DomainError):
    code = "ssrf_blocked"


class DomainNotAllowed(DomainError):
    code = "domain_not_allowed"


class ResolutionFailed(DomainError):
    code = "dns_failed"


_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network
# Special-purpose ranges (IANA registries) that a request on a team's behalf never reaches.
_V4_BLOCKED = [
    (_V4("0.0.0.0/8"), "'this network' (0/8)"),
    (_V4("10.0.0.0/8"), "private (10/8)"),
    (_V4("100.64.0.0/10"), "carrier-grade NAT (100.64/10)"),
    (_V4("127.0.0.0/8"), "loopback (127/8)"),
    (_V4("169.254.0.0/16"), "link-local / cloud metadata (169.254/16)"),
    (_V4("172.16.0.0/12"), "private (172.16/12)"),
    (_V4("192.0.0.0/24"), "IETF protocol assignments (192.0.0/24)"),
    (_V4("192.0.2.0/24"), "documentation (192.0.2/24)"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast (192.88.99/24)"),
    (_V4("192.168.0.0/16"), "private (192.168/16)"),
    (_V4("198.18.0.0/15"), "benchmarking (198.18/15)"),
    (_V4("198.51.100.0/24"), "documentation (198.51.100/24)"),
    (_V4("203.0.113.0/24"), "documentation (203.0.113/24)"),
    (_V4("224.0.0.0/4"), "multicast (224/4)"),
    (_V4("240.0.0.0/4"), "reserved or broadcast (240/4)"),
]
_V6_BLOCKED = [
    (_V6("::/128"), "unspecified (::)"),
    (_V6("::1/128"), "loopback (::1)"),
    (_V6("64:ff9b:1::/48"), "local-use NAT64 (64:ff9b:1::/48)"),
    (_V6("100::/64"), "discard-only (100::/64)"),
    (_V6("2001:2::/48"), "benchmarking (2001:2::/48)"),
    (_V6("2001:10::/28"), "ORCHID (2001:10::/28)"),
    (_V6("2001:20::/28"), "ORCHIDv2 (2001:20::/28)"),
    (_V6("2001:db8::/32"), "documentation (2001:db8::/32)"),
    (_V6("3fff::/20"), "documentation (3fff::/20)"),
    (_V6("5f00::/16"), "segment routing (5f00::/16)"),
    (_V6("fc00::/7"), "unique local (fc00::/7)"),
    (_V6("fe80::/10"), "link-local (fe80::/10)"),
    (_V6("fec0::/10"), "site-local (fec0::/10)"),
    (_V6("ff00::/8"), "multicast (ff00::/8)"),
]
_V6_GLOBAL_UNICAST = _V6("2000::/3")
_MAPPED = _V6("::ffff:0:0/96")
_TRANSLATED = _V6("::ffff:0:0:0/96")
_COMPATIBLE = _V6("::/96")
_NAT64 = _V6("64:ff9b::/96")
_SIX_TO_FOUR = _V6("2002::/16")
_TEREDO = _V6("2001::/32")


def address_problem(ip: IPAddress) -> str | None:
    """Why a connection to `ip` is refused, or None for a global address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _V6("::/127"):
            return "unspecified (::)" if int(ip) == 0 else "loopback (::1)"
        embedded = _embedded_ipv4(ip)
        for kind, ip4 in embedded:
            problem = address_problem(ip4)
            if problem:
                return f"{kind} form of {ip4}: {problem}"
        if embedded:
            return None
        for network, label in _V6_BLOCKED:
            if ip in network:
                return label
        if ip not in _V6_GLOBAL_UNICAST:
            return "not a global unicast address"
        return None
    for network, label in _V4_BLOCKED:
        if ip in network:
            return label
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    value = int(ip)
    low32 = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if ip in _MAPPED:
        return [("IPv4-mapped", low32)]
    if ip in _TRANSLATED:
        return [("IPv4-translated", low32)]
    if ip in _COMPATIBLE:
        return [("IPv4-compatible", low32)]
    if ip in _NAT64:
        return [("NAT64", low32)]
    if ip in _SIX_TO_FOUR:
        return [("6to4", ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF))]
    if ip in _TEREDO:
        server = ipaddress.IPv4Address((value >> 64) & 0xFFFFFFFF)
        client = ipaddress.IPv4Address(~value & 0xFFFFFFFF)
        return [("Teredo server", server), ("Teredo client", client)]
    return []


# --- hosts ------------------------------------------------------------------------------------

_NUMERIC_LABEL = re.compile(r"(?i)^(0x[0-9a-f]*|[0-9]+)$")
_HOST_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")


def parse_ipv4_number(host: str) -> ipaddress.IPv4Address | None:
    """An IPv4 address in any spelling inet_aton accepts (1 to 4 parts, each decimal, octal
    with a leading 0, or hex with 0x), or None if the host does not end in a number. A host
    that ends in a number but is not a valid address is refused (as browsers do)."""
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels = labels[:-1]
    if not _NUMERIC_LABEL.match(labels[-1]):
        return None
    if len(labels) > 4:
        raise SsrfBlocked(f"blocked: {host!r} is not a valid IPv4 address")
    numbers = []
    for label in labels:
        if not _NUMERIC_LABEL.match(label):
            raise SsrfBlocked(f"blocked: {host!r} is not a valid IPv4 address")
        if label.lower().startswith("0x"):
            numbers.append(int(label[2:] or "0", 16))
        elif len(label) > 1 and label.startswith("0"):
            if not re.fullmatch(r"[0-7]+", label):
                raise SsrfBlocked(f"blocked: {host!r} is not a valid IPv4 address")
            numbers.append(int(label, 8))
        else:
            numbers.append(int(label))
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise SsrfBlocked(f"blocked: {host!r} is not a valid IPv4 address")
    value = last
    for index, number in enumerate(head):
        value |= number << (24 - 8 * index)
    return ipaddress.IPv4Address(value)


def normalize_host(raw_host: str) -> tuple[str, IPAddress | None]:
    """The host as compared and looked up (lower case, no trailing dot, canonical for an IP
    literal) and its address when it is one. Refuses malformed hosts."""
    host = raw_host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise SsrfBlocked("blocked: the URL has no host")
    if "%" in host:
        raise SsrfBlocked(f"blocked: {raw_host!r}: percent-encoding and zone ids are not allowed")
    if ":" in host:
        try:
            ip6 = ipaddress.IPv6Address(host)
        except ValueError:
            raise SsrfBlocked(f"blocked: {raw_host!r} is not a valid IPv6 address") from None
        return str(ip6), ip6
    ip4 = parse_ipv4_number(host)
    if ip4 is not None:
        return str(ip4), ip4
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253 or not all(_HOST_NAME.match(label) for label in name.split(".")):
        raise SsrfBlocked(f"blocked: {raw_host!r} is not a valid host name")
    return name, None


def host_matches(host: str, patterns: Iterable[str]) -> bool:
    """Domain allowlist: an exact host, or `*.example.com` for its strict subdomains (the apex
    needs its own entry). An empty list allows every host."""
    patterns = [p.strip().lower().rstrip(".") for p in patterns if p.strip()]
    if not patterns:
        return True
    for pattern in patterns:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and fnmatchcase(host, pattern):
                return True
        elif host == pattern:
            return True
    return False


def parse_allow(entries: Iterable[str]) -> frozenset[tuple[str, int]]:
    """OPENHIVE_SSRF_ALLOW entries (`host:port`, `[v6]:port`) as normalized pairs."""
    pairs = set()
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"OPENHIVE_SSRF_ALLOW entry {entry!r} is not host:port")
        pairs.add((normalize_host(host)[0], int(port)))
    return frozenset(pairs)


# --- the decision -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A checked destination: connect only to `addresses` (all checked, in resolver order)."""

    url: httpx.URL
    host: str
    port: int
    addresses: tuple[str, ...]
    exempt: bool = False

    @property
    def pin_key(self) -> tuple[str, int]:
        return (self.url.raw_host.decode("ascii").lower(), self.port)


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


_dns_pools: dict[int, ThreadPoolExecutor] = {}


def _dns_pool() -> ThreadPoolExecutor:
    # One pool per process: workers fork after start-up, and a forked copy of a pool whose
    # threads stayed in the parent would never run anything.
    pid = os.getpid()
    if pid not in _dns_pools:
        _dns_pools.clear()
        _dns_pools[pid] = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ssrf-dns")
    return _dns_pools[pid]


def _resolve(host: str, port: int, resolver: Resolver | None) -> list[str]:
    if resolver is not None:
        return list(resolver(host, port))
    # getaddrinfo has no timeout of its own; a stuck resolver must not hold a session.
    future = _dns_pool().submit(system_resolver, host, port)
    try:
        return future.result(timeout=DNS_TIMEOUT_SECONDS)
    except FutureTimeout:
        raise ResolutionFailed(f"DNS lookup of {host} timed out") from None
    except OSError as exc:
        raise ResolutionFailed(f"DNS lookup of {host} failed: {exc}") from None


def check_url(
    url: str | httpx.URL,
    *,
    allow: frozenset[tuple[str, int]] = frozenset(),
    allowed_domains: Iterable[str] = (),
    resolver: Resolver | None = None,
) -> Target:
    """Decide whether a request may go to `url`; returns the target with the addresses to
    connect to. Raises SsrfBlocked, DomainNotAllowed or ResolutionFailed."""
    import httpx  # ~0.3 s to import: only where a URL is actually checked

    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise SsrfBlocked(f"blocked: invalid URL: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise SsrfBlocked(
            f"blocked: scheme {parsed.scheme or '(none)'!r} is not allowed; use http or https"
        )
    if parsed.userinfo:
        raise SsrfBlocked(
            "blocked: credentials in the URL (user:password@) are not allowed; "
            "send them in a header that references the vault"
        )
    host, literal = normalize_host(parsed.raw_host.decode("ascii", "replace"))
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    domains = list(allowed_domains)
    if not host_matches(host, domains):
        raise DomainNotAllowed(f"{host} is not in this team's web allowlist ({', '.join(domains)})")
    exempt = (host, port) in allow
    if not exempt and (host == "localhost" or host.endswith(".localhost")):
        raise SsrfBlocked(f"blocked: {host!r} names this machine (localhost)")
    if literal is not None:
        addresses = [str(literal)]
    else:
        addresses = _resolve(host, port, resolver)
        if not addresses:
            raise ResolutionFailed(f"DNS lookup of {host} returned no address")
    checked: list[str] = []
    for text in addresses:
        try:
            ip = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            raise SsrfBlocked(f"blocked: {host} resolved to {text!r}, not an address") from None
        problem = None if exempt else address_problem(ip)
        if problem:
            shown = host if literal is not None else f"{host} (resolves to {ip})"
            raise SsrfBlocked(f"blocked: {shown} is a non-public address: {problem}")
        if str(ip) not in checked:
            checked.append(str(ip))
    return Target(url=parsed, host=host, port=port, addresses=tuple(checked), exempt=exempt)

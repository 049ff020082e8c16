"""The SSRF guard's decisions (openhive.core.guards.ssrf): every numeric spelling of IPv4,
every IPv6 form of a non-public IPv4 address, names that resolve to loopback or private space
(an injected resolver stands in for DNS: nothing here connects anywhere), allowlists and the
operator's exemptions. Connections only ever go to 127.0.0.1 / ::1."""

from __future__ import annotations

import ipaddress
import socket

import httpcore
import httpx
import pytest

from openhive.core.guards import pinning
from openhive.core.guards.ssrf import (
    DomainNotAllowed,
    ResolutionFailed,
    SsrfBlocked,
    check_url,
    parse_allow,
)

from .loopback import LoopbackServer

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "127.000.000.001",
    "0177.0.0.1",
    "0177.1",
    "0x7f.0.0.1",
    "0x7f.1",
    "0X7F.0X0.0X0.0X1",
    "0x7f000001",
    "2130706433",
    "017700000001",
    "127.0.0.1.",
    "127.255.255.254",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
    "[::ffff:0:127.0.0.1]",
    "[::127.0.0.1]",
    "[64:ff9b::127.0.0.1]",
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::]",
    "[2001:0:4136:e378:8000:63bf:80ff:fffe]",  # Teredo, client 127.0.0.1
    "localhost",
    "LOCALHOST.",
    "api.localhost",
]
NON_PUBLIC = [
    "0.0.0.0",
    "0",
    "[::]",
    "10.0.0.1",
    "012.0.0.1",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.1.1",
    "3232235777",  # 192.168.1.1
    "169.254.169.254",
    "0xa9fea9fe",  # 169.254.169.254
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
    "100.64.0.1",
    "100.127.255.255",
    "192.0.0.8",
    "192.0.2.1",
    "198.18.0.1",
    "198.51.100.7",
    "203.0.113.9",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "[fc00::1]",
    "[fd12:3456::1]",
    "[fc01::]",
    "[fe80::1]",
    "[febf::1]",
    "[fec0::1]",
    "[ff02::1]",
    "[2001:db8::1]",
    "[100::1]",
    "[64:ff9b:1::1]",
    "[2002:a00:1::]",  # 6to4 of 10.0.0.1
    "[2002:c0a8:101::]",  # 6to4 of 192.168.1.1
    "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
]
MALFORMED = [
    "256.0.0.1",
    "1.2.3.4.5",
    "08.0.0.1",
    "0x100.0.0.1",
    "1.2.3.4294967296",
    "example.123",
    "127.0.0.1%00",
    "%31%32%37.0.0.1",
    "[fe80::1%25eth0]",
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_every_spelling_of_loopback_is_blocked(host):
    with pytest.raises(SsrfBlocked):
        check_url(f"http://{host}/", resolver=lambda h, p: ["127.0.0.1"])


@pytest.mark.parametrize("host", NON_PUBLIC)
def test_private_reserved_and_special_addresses_are_blocked(host):
    with pytest.raises(SsrfBlocked):
        check_url(f"http://{host}/")


@pytest.mark.parametrize("host", MALFORMED)
def test_malformed_numeric_hosts_are_refused_not_guessed(host):
    with pytest.raises(SsrfBlocked):
        check_url(f"http://{host}/")


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "::ffff:10.0.0.1", "fd00::5", "0.0.0.0"],
)
def test_a_name_that_resolves_to_a_non_public_address_is_blocked(address):
    with pytest.raises(SsrfBlocked, match="resolves to"):
        check_url("https://evil.example/", resolver=lambda h, p: [address])


def test_one_bad_address_among_good_ones_blocks_the_name():
    resolver = lambda h, p: ["93.184.216.34", "2606:2800:220:1::1", "127.0.0.1"]  # noqa: E731
    with pytest.raises(SsrfBlocked, match=r"127\.0\.0\.1"):
        check_url("https://mixed.example/", resolver=resolver)


def test_real_dns_for_localhost_names_is_never_asked_or_is_blocked():
    with pytest.raises(SsrfBlocked):
        check_url("http://localhost:8080/")
    with pytest.raises(SsrfBlocked):
        check_url("http://127.0.0.1.nip.io.localhost/")


def test_a_public_name_passes_with_its_checked_addresses():
    target = check_url(
        "https://Example.COM./path?q=1",
        resolver=lambda h, p: ["93.184.216.34", "93.184.216.34", "2606:2800:220:1::1"],
    )
    assert target.host == "example.com" and target.port == 443
    assert target.addresses == ("93.184.216.34", "2606:2800:220:1::1")


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]
)
def test_public_addresses_pass(address):
    assert check_url("http://public.example/", resolver=lambda h, p: [address]).addresses


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/",
        "gopher://example.com/",
        "javascript:alert(1)",
        "//example.com/",
        "http:///nohost",
        "http://user:pw@example.com/",
        "http://user@example.com/",
        "http://exa mple.com/",
    ],
)
def test_only_plain_http_and_https_urls_without_userinfo(url):
    with pytest.raises(SsrfBlocked):
        check_url(url, resolver=lambda h, p: ["93.184.216.34"])


def test_domain_allowlist_exact_and_strict_subdomains():
    resolve = lambda h, p: ["93.184.216.34"]  # noqa: E731
    allowed = ["api.example.com", "*.status.io"]
    assert check_url("https://api.example.com/", allowed_domains=allowed, resolver=resolve)
    assert check_url("https://eu.status.io/", allowed_domains=allowed, resolver=resolve)
    assert check_url("https://a.b.status.io/", allowed_domains=allowed, resolver=resolve)
    for url in ("https://status.io/", "https://example.com/", "https://evilstatus.io/"):
        with pytest.raises(DomainNotAllowed):
            check_url(url, allowed_domains=allowed, resolver=resolve)


def test_the_allowlist_is_checked_before_any_dns_lookup():
    def resolver(host, port):
        raise AssertionError("DNS must not be asked about a host the team may not fetch")

    with pytest.raises(DomainNotAllowed):
        check_url("https://elsewhere.example/", allowed_domains=["a.example"], resolver=resolver)


def test_exemptions_are_exact_host_and_port():
    allow = parse_allow(["127.0.0.1:8123", "[::1]:9000", "metrics.internal:9100"])
    assert check_url("http://127.0.0.1:8123/x", allow=allow).exempt
    assert check_url("http://127.1:8123/x", allow=allow).exempt  # the same destination
    assert check_url("http://[::1]:9000/", allow=allow).exempt
    internal = check_url(
        "http://metrics.internal:9100/", allow=allow, resolver=lambda h, p: ["10.0.0.7"]
    )
    assert internal.exempt and internal.addresses == ("10.0.0.7",)
    for url in ("http://127.0.0.1:8124/", "http://127.0.0.2:8123/", "http://localhost:8123/"):
        with pytest.raises(SsrfBlocked):
            check_url(url, allow=allow, resolver=lambda h, p: ["127.0.0.1"])
    with pytest.raises(ValueError):
        parse_allow(["no-port"])


def test_dns_failure_is_reported_not_guessed():
    def resolver(host, port):
        raise ResolutionFailed("no such host")

    with pytest.raises(ResolutionFailed):
        check_url("https://nxdomain.example/", resolver=resolver)
    with pytest.raises(ResolutionFailed):
        check_url("https://empty.example/", resolver=lambda h, p: [])


# --- the pinned connection ---------------------------------------------------------------------


@pytest.fixture
def server():
    server = LoopbackServer()
    yield server
    server.close()


def test_the_connection_goes_to_the_checked_address_not_a_second_lookup(server, monkeypatch):
    """DNS rebinding: the name resolved once (to the exempt loopback server); a later lookup
    would answer something else, but the connection uses the address that was checked."""
    real_getaddrinfo = socket.getaddrinfo

    def only_literals(host, *args, **kwargs):
        # Connecting to an IP literal parses it (no DNS); a name would be a second lookup.
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pytest.fail(f"a second DNS lookup of {host} happened")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", only_literals)
    allow = parse_allow([f"rebind.example:{server.port}"])
    target = check_url(
        f"http://rebind.example:{server.port}/text",
        allow=allow,
        resolver=lambda h, p: ["127.0.0.1"],
    )
    transport = pinning.PinnedTransport()
    with pinning.pinned(target):
        response = transport.handle_request(httpx.Request("GET", target.url))
        body = response.read()
    assert body == b"hello from loopback"
    # The Host header is the name, as TLS SNI would be: only the TCP connect was redirected.
    assert server.hits[-1][2]["Host"] == f"rebind.example:{server.port}"


def test_a_connection_nobody_checked_is_refused(server):
    transport = pinning.PinnedTransport()
    with pytest.raises(httpx.ConnectError, match="no checked address"):
        transport.handle_request(httpx.Request("GET", server.url("/text")))
    assert server.hits == []


async def test_the_async_transport_pins_too(server):
    allow = parse_allow([server.authority])
    target = check_url(server.url("/text"), allow=allow)
    async with httpx.AsyncClient(transport=pinning.AsyncPinnedTransport()) as client:
        with pinning.pinned(target):
            response = await client.get(str(target.url))
        assert response.text == "hello from loopback"
        with pytest.raises(httpx.ConnectError):
            await client.get(server.url("/text"))


def test_backend_never_resolves_on_its_own():
    backend = pinning._PinnedBackend()
    with pytest.raises(httpcore.ConnectError):
        backend.connect_tcp("example.com", 80)


def test_names_the_system_resolver_maps_to_loopback_are_blocked():
    """Real resolution (getaddrinfo, in the guard's resolver pool) of names /etc/hosts maps to
    loopback: the check refuses them and nothing connects."""
    names = []
    for name in ("ip6-localhost", "ip6-loopback", socket.gethostname()):
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(name, 80)}
        except OSError:
            continue
        if any(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
            names.append(name)
    if not names:
        pytest.skip("no name on this machine resolves to loopback")
    for name in names:
        with pytest.raises(SsrfBlocked, match="resolves to"):
            check_url(f"http://{name}/")

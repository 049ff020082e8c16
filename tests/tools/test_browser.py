"""The browser tools through call_tool, in the real Chromium, against loopback sites only: the
pages server is exempted with OPENHIVE_SSRF_ALLOW, the forbidden server is not and must never
see a single connection (navigations, redirects, sub-resources, fetch/XHR, WebSockets, popups).
One browser for the whole module (the manager's thread)."""

# The shared fixtures are imported by name and then requested as arguments.
# ruff: noqa: F811

from __future__ import annotations

import json
import threading
import time

import pytest

from openhive.core import scrubbing
from openhive.core.registry import team_tools
from openhive.engine.models import ToolCall
from openhive.tools.browser import BROWSER_TOOL_NAMES
from vault.services import vault_store_secret

from .browserfixtures import (  # noqa: F401  (fixtures)
    SECRET,
    call,
    clock,
    exempt_site,
    forbidden,
    manager,
    ops,
    ref_of,
    site,
)
from .conftest import make_team, set_config

pytestmark = pytest.mark.django_db


def test_a_team_without_a_browser_section_is_never_offered_the_browser(call, main_team, ops):
    plain = make_team("plain", main_team)
    assert not {s.name for s in team_tools(plain, ["*"])} & set(BROWSER_TOOL_NAMES)
    assert set(BROWSER_TOOL_NAMES) <= {s.name for s in team_tools(ops, ["*"])}
    assert not {s.name for s in team_tools(ops, ["web_*"])} & set(BROWSER_TOOL_NAMES)
    refused = call("browser_navigate", team=plain, url="http://example.org/")
    assert refused["success"] is False and refused["code"] == "UNKNOWN_TOOL"


def test_navigates_reads_the_page_and_follows_a_link(call, site):
    opened = call("browser_navigate", url=site.url("/"))
    assert opened["success"], opened
    assert opened["title"] == "Home" and opened["url"] == site.url("/")
    snapshot = call("browser_snapshot")["snapshot"]
    assert 'heading "Welcome home"' in snapshot
    clicked = call("browser_click", ref=ref_of(snapshot, "Search form"))
    assert clicked["success"], clicked
    assert clicked["url"] == site.url("/form") and clicked["title"] == "Form"
    back = call("browser_go_back")
    assert back["url"] == site.url("/")
    forward = call("browser_go_forward")
    assert forward["url"] == site.url("/form")
    stale = call("browser_click", ref="e999")
    assert stale["code"] == "REF_NOT_FOUND" and "browser_snapshot" in stale["error"]


def test_a_form_posts_and_the_page_follows_its_redirect(call, site):
    call("browser_navigate", url=site.url("/form"))
    snapshot = call("browser_snapshot")["snapshot"]
    typed = call("browser_type", ref=ref_of(snapshot, "Query"), text="blue whales", submit=True)
    assert typed["success"], typed
    assert typed["title"] == "Result" and typed["url"].startswith(site.url("/result?q=blue"))
    assert "You searched: blue whales" in call("browser_snapshot")["snapshot"]
    assert site.posts[-1] == ("/search", {"q": "blue whales"})


def test_a_redirect_to_a_private_address_is_refused(call, site, forbidden):
    result = call("browser_navigate", url=site.url(f"/hop?to={forbidden.base}/secret"))
    assert result["success"] is False and result["code"] == "BLOCKED"
    assert "non-public address" in result["error"]
    direct = call("browser_navigate", url=f"{forbidden.base}/secret")
    assert direct["code"] == "SSRF_BLOCKED"
    assert forbidden.connections == 0


def test_no_request_of_a_page_reaches_a_private_address(call, site, forbidden):
    result = call("browser_navigate", url=site.url("/subresources"))
    assert result["success"], result
    snapshot = ""
    for _ in range(150):  # the page's script reports when every attempt has settled
        snapshot = call("browser_snapshot")["snapshot"]
        if "results:" in snapshot:
            break
        time.sleep(0.1)
    assert "fetch=failed" in snapshot and "xhr=failed" in snapshot, snapshot
    assert "ws=open" not in snapshot
    blocked = result.get("blocked_requests", [])
    urls = " ".join(b["url"] for b in blocked)
    assert "/img.png" in urls and "/frame" in urls and "localhost" in urls, blocked
    time.sleep(0.3)
    assert forbidden.connections == 0


def test_a_popup_opens_in_the_same_guarded_browser(call, site, forbidden):
    call("browser_navigate", url=site.url("/popup"))
    snapshot = call("browser_snapshot")["snapshot"]
    opened = call("browser_click", ref=ref_of(snapshot, '"Open"'))
    assert opened["success"], opened
    assert opened["opened_pages"] and opened["url"] == site.url("/result?q=popped")
    assert "You searched: popped" in call("browser_snapshot")["snapshot"]
    call("browser_navigate", url=site.url("/popup"))
    snapshot = call("browser_snapshot")["snapshot"]
    call("browser_click", ref=ref_of(snapshot, "Open forbidden"))
    time.sleep(0.3)
    assert forbidden.connections == 0


def test_downloads_are_refused_and_nothing_is_written(call, site, workspace):
    call("browser_navigate", url=site.url("/download"))
    snapshot = call("browser_snapshot")["snapshot"]
    clicked = call("browser_click", ref=ref_of(snapshot, "Get the file"))
    direct = call("browser_navigate", url=site.url("/file.bin"))
    assert direct["success"] is False and direct["code"] == "DOWNLOAD_BLOCKED", direct
    assert clicked["success"] is False or clicked.get("downloads_refused"), clicked
    assert not list(workspace.rglob("file.bin"))


def test_two_teams_never_share_cookies(call, site, ops, main_team):
    other = make_team("research", main_team)
    set_config("research", browser={})
    call("browser_navigate", url=site.url("/cookie/set?v=ops-cookie"))
    shown = call("browser_navigate", url=site.url("/cookie/show"))
    assert shown["success"], shown
    assert "team=ops-cookie" in call("browser_snapshot")["snapshot"]
    call("browser_navigate", team=other, url=site.url("/cookie/show"))
    theirs = call("browser_snapshot", team=other)["snapshot"]
    assert "no cookie" in theirs and "ops-cookie" not in theirs


@pytest.mark.usefixtures("vault_key")
def test_a_vault_secret_is_typed_but_never_shown(call, site, ops, workspace):
    vault_store_secret(team=ops, key="site_password", value=SECRET, updated_by="test")
    scrubbing.invalidate()
    call("browser_navigate", url=site.url("/login"))
    snapshot = call("browser_snapshot")["snapshot"]
    token, password = ref_of(snapshot, "Account token"), ref_of(snapshot, "Password")
    # Typed into a visible field that the page echoes into its text as well.
    echoed = call("browser_type", ref=token, text="{{vault:site_password}}")
    assert echoed["success"], echoed
    shown = call("browser_snapshot")
    assert SECRET not in json.dumps(shown) and "[REDACTED]" in shown["snapshot"]
    shot = call("browser_screenshot")
    assert shot["success"] and (workspace / shot["path"]).is_file()
    signed_in = call("browser_type", ref=password, text="{{vault:site_password}}", submit=True)
    assert signed_in["success"], signed_in
    assert "Welcome" in call("browser_snapshot")["snapshot"]
    assert site.posts[-1][1]["password"] == SECRET  # the real value reached the site
    rows = ToolCall.objects.filter(tool__startswith="browser_")
    assert SECRET not in json.dumps([[r.arguments, r.result, r.error] for r in rows])
    missing = call("browser_type", ref=token, text="{{vault:nope}}")
    assert missing["code"] == "NOT_FOUND"


def test_a_screenshot_is_a_png_in_the_team_workspace(call, site, workspace):
    call("browser_navigate", url=site.url("/"))
    shot = call("browser_screenshot", full_page=True)
    assert shot["success"], shot
    assert shot["path"].startswith("browser/") and shot["path"].endswith(".png")
    data = (workspace / shot["path"]).read_bytes()
    assert data.startswith(b"\x89PNG") and shot["bytes"] == len(data)


def test_the_domain_allowlist_applies_to_the_browser(call, site):
    set_config("ops", browser={"allowed_domains": ["example.org"]})
    refused = call("browser_navigate", url=site.url("/"))
    assert refused["success"] is False and refused["code"] == "DOMAIN_NOT_ALLOWED"
    assert "example.org" in refused["error"]


def test_tools_before_any_page_say_what_to_do(call):
    result = call("browser_snapshot")
    assert result["success"] is False and result["code"] == "NO_PAGE"
    assert "browser_navigate" in result["error"]
    assert call("browser_close")["closed"] is False


@pytest.fixture
def echo_socket(settings, site):
    """A WebSocket echo server on loopback, exempted like the pages server."""
    from websockets.sync.server import serve

    seen: list[tuple[str, str | None]] = []

    def echo(connection) -> None:
        seen.append((connection.request.path, connection.request.headers.get("Origin")))
        for message in connection:
            connection.send(f"echo {message}")

    server = serve(echo, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.socket.getsockname()[1]
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "SSRF_ALLOW": [site.authority, f"127.0.0.1:{port}"],
    }
    yield f"ws://127.0.0.1:{port}", seen
    server.shutdown()


def test_an_allowed_websocket_is_relayed_to_the_checked_address(call, site, echo_socket):
    url, seen = echo_socket
    assert call("browser_navigate", url=site.url(f"/socket?to={url}/live"))["success"]
    snapshot = ""
    for _ in range(150):
        snapshot = call("browser_snapshot")["snapshot"]
        if "reply:" in snapshot:
            break
        time.sleep(0.1)
    assert "reply: echo ping" in snapshot, snapshot
    assert seen == [("/live", f"http://{site.authority}")]


def test_the_page_connects_to_the_address_the_guard_resolved(call, site, settings, monkeypatch):
    """Chromium never resolves a name itself: a name only our resolver knows still loads, from
    the address the guard checked (so a second, rebound DNS answer could never be used)."""
    from openhive.core.guards import ssrf

    settings.OPENHIVE = {**settings.OPENHIVE, "SSRF_ALLOW": [f"status.invalid:{site.port}"]}
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"] if host == "status.invalid" else []

    monkeypatch.setattr(ssrf, "system_resolver", resolver)
    opened = call("browser_navigate", url=f"http://status.invalid:{site.port}/")
    assert opened["success"], opened
    assert opened["title"] == "Home" and "status.invalid" in asked

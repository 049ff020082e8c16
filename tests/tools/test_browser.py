"""The browser tools through call_tool, in the real Chromium, against loopback sites only: the
pages server is exempted with OPENHIVE_SSRF_ALLOW, the forbidden server is not and must never
see a single connection. One browser for the whole module (the manager's thread)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from openhive.core import scrubbing
from openhive.core.context import ToolContext
from openhive.core.registry import team_tools
from openhive.engine.models import ToolCall
from openhive.engine.tool_calls import call_tool
from openhive.tools import browsermanager
from openhive.tools.browser import BROWSER_TOOL_NAMES
from openhive.tools.browsermanager import BrowserManager
from teams.agent import agent_spec_for, run_team_session
from vault.services import vault_store_secret

from .browserpages import ForbiddenServer, PagesServer
from .conftest import make_team, set_config

pytestmark = pytest.mark.django_db

SECRET = "pw-Zq81mXv3Lr0T"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def manager(clock):
    manager = BrowserManager(max_contexts=2, idle_seconds=300, clock=clock)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(browsermanager._managers, os.getpid(), manager)
        yield manager
    manager.shutdown()


@pytest.fixture(scope="module")
def forbidden():
    server = ForbiddenServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def site(forbidden):
    server = PagesServer(forbidden=forbidden.base, password=SECRET)
    yield server
    server.close()


@pytest.fixture(autouse=True)
def exempt_site(settings, site, manager):
    settings.OPENHIVE = {**settings.OPENHIVE, "SSRF_ALLOW": [site.authority]}
    yield
    for team in manager.live_teams():
        manager.close_team(team)


@pytest.fixture
def ops(main_team):
    team = make_team("ops", main_team)
    set_config("ops", browser={"timeout_ms": 10_000})
    return team


@pytest.fixture
def call(ops):
    def invoke(tool: str, team=None, **arguments: object) -> dict:
        team = team or ops
        ctx = ToolContext(
            team=team,
            actor=team.name,
            allowed_tools=["*"],
            tools={spec.name: spec for spec in team_tools(team, ["*"])},
        )
        return call_tool(ctx, tool, arguments)

    return invoke


def ref_of(snapshot: str, text: str) -> str:
    """The ref of the first snapshot line that mentions `text`."""
    for line in snapshot.splitlines():
        if text in line and "[ref=" in line:
            return line.split("[ref=", 1)[1].split("]", 1)[0]
    raise AssertionError(f"no element with {text!r} in:\n{snapshot}")


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
    for _ in range(50):  # the page's script reports when every attempt has settled
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


def test_contexts_close_when_idle_and_are_bounded(call, site, manager, clock, main_team, ops):
    teams = [ops, make_team("a", main_team), make_team("b", main_team)]
    for team in teams[1:]:
        set_config(team.name, browser={})
    for team in teams:
        assert call("browser_navigate", team=team, url=site.url("/"))["success"]
    assert len(manager.live_teams()) == 2 and "ops" not in manager.live_teams()
    clock.now += 301
    assert sorted(manager.reap()) == ["a", "b"] and manager.live_teams() == []
    again = call("browser_snapshot", team=teams[1])
    assert again["code"] == "NO_PAGE"
    assert call("browser_navigate", url=site.url("/"))["success"]
    assert call("browser_close")["closed"] is True and manager.live_teams() == []


def test_the_admin_lists_browser_actions_and_shows_the_screenshot(call, site, admin_client):
    call("browser_navigate", url=site.url("/"))
    shot = call("browser_screenshot")
    assert shot["success"], shot
    listing = admin_client.get("/admin/tools/reachcall/?team_name=ops").content.decode()
    assert "browser_navigate" in listing and site.url("/") in listing
    assert shot["path"] in listing and "browser actions" in listing
    row = ToolCall.objects.get(tool="browser_screenshot")
    page = admin_client.get(f"/admin/tools/reachcall/{row.pk}/change/").content.decode()
    assert 'src="data:image/png;base64,iVBORw0KGgo' in page


def chromium_processes() -> int:
    """Chromium processes started with this module's launch flags (the dead proxy is ours)."""
    count = 0
    for proc in os.listdir("/proc"):
        try:
            with open(f"/proc/{proc}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except (OSError, ValueError):
            continue
        if b"--proxy-server=http://127.0.0.1:9" in cmdline and b"--type=" not in cmdline:
            count += 1
    return count


def test_the_browser_ends_with_its_manager(call, site, ops):
    before = chromium_processes()
    own = BrowserManager(max_contexts=1, idle_seconds=300)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(browsermanager._managers, os.getpid(), own)
        assert call("browser_navigate", url=site.url("/"))["success"]
        assert chromium_processes() == before + 1
        own.shutdown()
    for _ in range(50):
        if chromium_processes() == before:
            break
        time.sleep(0.1)
    assert chromium_processes() == before


WORKER = """
import django, sys
django.setup()
from openhive.tools.browsermanager import browser_manager
from openhive.tools.browserrouting import Policy
result, _ = browser_manager().run(
    "ops", Policy(allowed_domains=[], timeout_ms=10000), lambda b: b.navigate(sys.argv[1])
)
print(result["title"], flush=True)
"""


def test_the_browser_ends_when_its_worker_process_exits(site, tmp_path):
    before = chromium_processes()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "openhive.settings",
        "OPENHIVE_DATA_DIR": str(tmp_path),
        "OPENHIVE_SSRF_ALLOW": site.authority,
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", WORKER, site.url("/")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0 and done.stdout.strip() == "Home", done.stderr[-2000:]
    for _ in range(50):
        if chromium_processes() == before:
            break
        time.sleep(0.1)
    assert chromium_processes() == before


def test_a_team_session_browses_with_the_offered_tools(ops, site, scripted_provider, main_team):
    scripted_provider(
        [
            {
                "when": {"team": "ops", "last": "user", "matches": "(?i)home page"},
                "reply": {
                    "tool_calls": [
                        {"name": "browser_navigate", "arguments": {"url": site.url("/")}}
                    ]
                },
            },
            {
                "when": {"team": "ops", "last": "tool", "tool": "browser_navigate"},
                "reply": {"tool_calls": [{"name": "browser_snapshot", "arguments": {}}]},
            },
            {
                "when": {"team": "ops", "last": "tool", "tool": "browser_snapshot"},
                "reply": {"content": "The home page welcomes us."},
            },
        ]
    )
    spec = agent_spec_for(ops)
    assert "browser_navigate" in {tool.name for tool in spec.tools}
    prompt = "\n".join(str(m["content"]) for m in spec.system_messages)
    assert "`browser_snapshot`" in prompt
    assert "browser_navigate" not in {tool.name for tool in agent_spec_for(main_team).tools}
    outcome = run_team_session(ops, "read the home page")
    assert outcome.ok, outcome.error
    calls = list(ToolCall.objects.filter(session_id=outcome.session_id).order_by("id"))
    assert [(c.tool, c.success) for c in calls] == [
        ("browser_navigate", True),
        ("browser_snapshot", True),
    ]
    assert 'heading "Welcome home"' in calls[1].result["snapshot"]


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
    for _ in range(50):
        snapshot = call("browser_snapshot")["snapshot"]
        if "reply:" in snapshot:
            break
        time.sleep(0.1)
    assert "reply: echo ping" in snapshot, snapshot
    assert seen == [("/live", f"http://{site.authority}")]


def test_the_operator_can_call_a_browser_tool_from_the_command_line(ops, site):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    arguments = json.dumps({"url": site.url("/")})
    call_command("openhive", "tool", "ops", "browser_navigate", arguments, stdout=out)
    assert json.loads(out.getvalue())["title"] == "Home"


def test_a_domain_rate_limit_bucket_holds_for_navigations(call, site):
    set_config(
        "ops",
        browser={},
        rate_limit_buckets={"local": {"rps": 0.001, "burst": 1, "domain": "127.0.0.1"}},
    )
    assert call("browser_navigate", url=site.url("/"))["success"]
    limited = call("browser_navigate", url=site.url("/form"))
    assert limited["success"] is False and limited["code"] == "RATE_LIMITED"

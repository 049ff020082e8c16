"""The browser's life: contexts close when idle and are bounded per worker, Chromium ends with
its manager and with its worker process; its actions appear in the admin, in a team session and
from the command line; domain rate limits hold for navigations."""

# The shared fixtures are imported by name and then requested as arguments.
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openhive.engine.models import ToolCall
from openhive.tools import browsermanager
from openhive.tools.browser import BROWSER_TOOLS
from openhive.tools.browsermanager import BrowserManager
from teams.agent import agent_spec_for, run_team_session

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
    """Chromium processes started with this module's launch flags (the dead proxy is ours),
    except those another test run on the same machine started. An orphan (its launcher gone)
    counts: a browser left behind must show."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for proc in os.listdir("/proc"):
        if not proc.isdigit():
            continue
        try:
            with open(f"/proc/{proc}/stat", "rb") as handle:
                # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'
                parents[int(proc)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{proc}/cmdline", "rb") as handle:
                commands[int(proc)] = handle.read()
        except (OSError, ValueError, IndexError):
            continue
    return sum(
        1
        for pid, cmdline in commands.items()
        if b"--proxy-server=http://127.0.0.1:9" in cmdline
        and b"--type=" not in cmdline
        and not _started_by_another_test_run(pid, parents, commands)
    )


def _started_by_another_test_run(
    pid: int, parents: dict[int, int], commands: dict[int, bytes]
) -> bool:
    me, seen = os.getpid(), set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        pid = parents.get(pid, 0)
        if pid == me:
            return False
        if b"pytest" in commands.get(pid, b""):
            return True
    return False


def test_the_browser_ends_with_its_manager(call, site, ops):
    before = chromium_processes()
    own = BrowserManager(max_contexts=1, idle_seconds=300)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(browsermanager._managers, os.getpid(), own)
        assert call("browser_navigate", url=site.url("/"))["success"]
        assert chromium_processes() == before + 1
        own.shutdown()
    for _ in range(150):
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
    for _ in range(150):
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


def test_session_threads_share_one_browser_thread_safely(manager, site):
    from concurrent.futures import ThreadPoolExecutor

    from openhive.tools.browserrouting import Policy

    def visit(team: str, path: str) -> tuple[str, str]:
        policy = Policy(allowed_domains=[], timeout_ms=10_000)
        result, _ = manager.run(team, policy, lambda b: b.navigate(site.url(path)))
        return team, result["title"]

    jobs = [("t1", "/"), ("t2", "/form"), ("t1", "/form"), ("t2", "/")] * 2
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: visit(*job), jobs))
    assert results == [(team, "Home" if path == "/" else "Form") for team, path in jobs]
    assert manager.launches == 1


@pytest.mark.parametrize("spec", BROWSER_TOOLS, ids=lambda s: s.name)
def test_every_browser_tool_has_a_portable_schema(spec):
    from openai.types.chat import ChatCompletionToolParam
    from pydantic import TypeAdapter

    from .test_registry import OPENAI_NAME, optional_fields_not_nullable, portability_problems

    declaration = spec.function_schema()
    parameters = declaration["function"]["parameters"]
    assert OPENAI_NAME.fullmatch(spec.name) and spec.description.strip()
    assert parameters.get("type") == "object" and portability_problems(parameters) == []
    assert optional_fields_not_nullable(spec.args, parameters) == []
    TypeAdapter(ChatCompletionToolParam).validate_python(declaration)

"""What a browser navigation costs through the browser tools, against bare Playwright driving
the same Chromium in the same run (interleaved, so a busy machine slows both alike).

    uv run python benchmarks/browser_navigation.py [--warm 60] [--fresh 12]

A loopback server (exempted with OPENHIVE_SSRF_ALLOW) serves a small page with a stylesheet,
a script and an image (four requests, each through the routing: guard, pinned fetch, fulfil).

- warm: `browser_navigate` on a team whose context is open (goal: <= 150 ms p50); baseline:
  `page.goto` of the same page in a bare context (no routing).
- fresh: the first navigation in a new context (`browser_close`, then `browser_navigate`; the
  Chromium process stays up; goal: <= 1.5 s p50); baseline: a bare `new_context` + `goto`.
- cold: the very first call of a worker (Chromium launched too), once, for information.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="openhive-bench-"))
os.environ["OPENHIVE_DATA_DIR"] = str(WORK / "data")
os.environ.pop("DATABASE_URL", None)  # a throwaway SQLite file
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")

PAGE = b"""<!doctype html><html><head><title>Bench</title>
<link rel="stylesheet" href="/style.css"><script src="/app.js"></script></head>
<body><h1>Status</h1><p>All systems operational.</p><img src="/logo.png" alt="logo">
<a href="/">again</a></body></html>"""
ASSETS = {
    "/": (PAGE, "text/html"),
    "/style.css": (b"body { font-family: sans-serif } h1 { color: #333 }", "text/css"),
    "/app.js": (b"document.documentElement.dataset.ready = '1';", "text/javascript"),
    "/logo.png": (
        bytes.fromhex(
            "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
            "0000000d4944415478da63f8cfc0f01f0005000201a5f1e1d30000000049454e44ae426082"
        ),
        "image/png",
    ),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body, ctype = ASSETS.get(self.path.split("?")[0], (b"not found", "text/plain"))
        self.send_response(200 if self.path.split("?")[0] in ASSETS else 404)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def interleave(n: int, warmup: int, **cases: Callable[[], object]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in cases}
    for round_ in range(warmup + n):
        for name, case in cases.items():
            started = time.perf_counter()
            case()
            if round_ >= warmup:
                times[name].append((time.perf_counter() - started) * 1000)
    return times


def report(title: str, times: dict[str, list[float]], baseline: str, goal_ms: float) -> None:
    print(f"\n{title}")
    print(f"  {'case':<44} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8}")
    for name, values in times.items():
        print(
            f"  {name:<44} {statistics.median(values):>8.1f} {pct(values, 90):>8.1f} "
            f"{max(values):>8.1f}"
        )
    measured = next(n for n in times if n != baseline)
    p50 = statistics.median(times[measured])
    added = p50 - statistics.median(times[baseline])
    verdict = "meets" if p50 <= goal_ms else "MISSES"
    print(
        f"  goal: <= {goal_ms:g} ms p50 for {measured!r}: {p50:.1f} ms ({added:+.1f} ms over "
        f"the baseline), {verdict} it"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm", type=int, default=60)
    parser.add_argument("--fresh", type=int, default=12)
    options = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    os.environ["OPENHIVE_SSRF_ALLOW"] = f"127.0.0.1:{port}"
    url = f"http://127.0.0.1:{port}/"

    import django

    django.setup()
    from django.core.management import call_command
    from playwright.sync_api import sync_playwright

    from openhive.core import paths
    from openhive.core.context import ToolContext
    from openhive.tools.browser import NavigateArgs, NoArgs, browser_close, browser_navigate
    from openhive.tools.browsermanager import LAUNCH_ARGS, browser_manager, chromium_path
    from teams.config import BrowserConfig, default_config, write_team_config
    from teams.models import Team
    from teams.services import team_ensure_main, team_workspace_scaffold

    call_command("migrate", verbosity=0)
    main_team = team_ensure_main()
    team, _ = Team.objects.get_or_create(name="bench", defaults={"parent": main_team})
    team_workspace_scaffold(paths.team_dir("bench"))
    config = default_config("bench", parent="main").model_copy(update={"browser": BrowserConfig()})
    write_team_config(config)
    ctx = ToolContext(team=team, actor="bench")
    args = NavigateArgs(url=url)

    def tool_navigate() -> None:
        result = browser_navigate(ctx, args)
        assert result["title"] == "Bench" and "blocked_requests" not in result, result

    def tool_fresh() -> None:
        browser_close(ctx, NoArgs())
        tool_navigate()

    started = time.perf_counter()
    tool_navigate()
    cold_ms = (time.perf_counter() - started) * 1000

    # Bare Playwright on a thread of its own, as the tools' browser is: the sync API keeps an
    # event loop running in its thread, where Django refuses database calls.
    pool = ThreadPoolExecutor(max_workers=1)
    bare: dict = {}

    def bare_start() -> None:
        bare["playwright"] = sync_playwright().start()
        bare["browser"] = bare["playwright"].chromium.launch(
            executable_path=chromium_path(), args=[a for a in LAUNCH_ARGS if "proxy" not in a]
        )
        bare["page"] = bare["browser"].new_context().new_page()

    def bare_goto() -> None:
        bare["page"].goto(url, wait_until="load")
        assert bare["page"].title() == "Bench"

    def bare_new() -> None:
        context = bare["browser"].new_context()
        page = context.new_page()
        page.goto(url, wait_until="load")
        assert page.title() == "Bench"
        context.close()

    def bare_stop() -> None:
        bare["browser"].close()
        bare["playwright"].stop()

    pool.submit(bare_start).result()
    warm = interleave(
        options.warm,
        5,
        **{
            "bare Playwright page.goto (warm)": lambda: pool.submit(bare_goto).result(),
            "browser_navigate (warm)": tool_navigate,
        },
    )
    fresh = interleave(
        options.fresh,
        1,
        **{
            "bare new_context + goto": lambda: pool.submit(bare_new).result(),
            "browser_close + browser_navigate (new ctx)": tool_fresh,
        },
    )
    pool.submit(bare_stop).result()
    pool.shutdown()
    browser_manager().shutdown()
    server.shutdown()

    print(f"Chromium: {chromium_path()}; page of 4 requests from 127.0.0.1:{port}")
    report(
        "Warm context: a navigation to a loopback page",
        warm,
        "bare Playwright page.goto (warm)",
        150,
    )
    report(
        "New context: the first navigation of a team (Chromium already running)",
        fresh,
        "bare new_context + goto",
        1500,
    )
    print(f"\nCold: the first call of a worker, Chromium launched too: {cold_ms:.0f} ms (once)")


if __name__ == "__main__":
    main()

"""What the guards cost: web_fetch over a bare httpx request, and the sandbox over a bare
subprocess, each against its baseline measured in the same run (interleaved, so a busy machine
slows both alike).

    uv run python benchmarks/reach_overhead.py [--requests 400] [--runs 200]

web_fetch: a loopback server (exempted with OPENHIVE_SSRF_ALLOW, as an operator would for an
internal service) answers a small text body. Baseline: `httpx.Client.get` with keep-alive.
Measured: the web_fetch tool function (URL check, team config and allowlist, pinned transport,
body cap and decoding) and the same call through `call_tool` (argument validation and the
audit row in a SQLite database). Goal: <= 2 ms p50 added by the tool function.

Sandbox: `/bin/true` through `openhive.core.sandbox.run` (bubblewrap, rlimits, cgroup) against
`subprocess.run(["/bin/true"])`, with bubblewrap's bare start-up as a breakdown. Goal: <= 15 ms
p50 added.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="openhive-bench-"))
os.environ["OPENHIVE_DATA_DIR"] = str(WORK / "data")
os.environ.pop("DATABASE_URL", None)  # the audit figure uses a throwaway SQLite file
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; with Nagle on, the body waits for the
    # client's delayed ACK (40 ms) on a keep-alive connection.
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b"status: all systems operational\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def interleave(n: int, warmup: int, **cases: Callable[[], object]) -> dict[str, list[float]]:
    """Run the cases in turn, n times each (after a warm-up), and return milliseconds."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for round_ in range(warmup + n):
        for name, case in cases.items():
            started = time.perf_counter()
            case()
            if round_ >= warmup:
                times[name].append((time.perf_counter() - started) * 1000)
    return times


def report(title: str, times: dict[str, list[float]], baseline: str, goal_ms: float | None) -> None:
    print(f"\n{title}")
    base = statistics.median(times[baseline])
    print(f"  {'case':<34} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>9}")
    for name, values in times.items():
        added = statistics.median(values) - base
        print(
            f"  {name:<34} {statistics.median(values):>8.3f} {pct(values, 99):>8.3f} "
            f"{'' if name == baseline else f'{added:+9.3f}'}"
        )
    if goal_ms is None:
        return
    measured = next(n for n in times if n != baseline)
    added = statistics.median(times[measured]) - base
    verdict = "meets" if added <= goal_ms else "MISSES"
    print(f"  goal: <= {goal_ms:g} ms p50 added by {measured!r}: {added:.3f} ms, {verdict} it")


def bench_web(requests: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    os.environ["OPENHIVE_SSRF_ALLOW"] = f"127.0.0.1:{port}"

    import django

    django.setup()
    import httpx
    from django.core.management import call_command

    from openhive.core.context import ToolContext
    from openhive.engine.tool_calls import call_tool
    from openhive.tools.web import WebFetchArgs, web_fetch_tool
    from teams.config import default_config, write_team_config
    from teams.models import Team
    from teams.services import team_ensure_main, team_workspace_scaffold

    call_command("migrate", verbosity=0)
    main = team_ensure_main()
    team, _ = Team.objects.get_or_create(name="bench", defaults={"parent": main})
    from openhive.core import paths

    team_workspace_scaffold(paths.team_dir("bench"))
    write_team_config(default_config("bench", parent="main"))
    url = f"http://127.0.0.1:{port}/status"
    ctx = ToolContext(team=team, actor="bench")
    args = WebFetchArgs(url=url)
    client = httpx.Client()

    def bare() -> None:
        client.get(url).read()

    def tool() -> None:
        assert web_fetch_tool(ctx, args)["status"] == 200

    def audited() -> None:
        assert call_tool(ctx, "web_fetch", {"url": url})["success"]

    times = interleave(requests, 50, **{"bare httpx.Client.get": bare, "web_fetch (tool)": tool})
    report(
        "web_fetch over a bare httpx request (loopback, keep-alive)",
        times,
        "bare httpx.Client.get",
        2.0,
    )
    audit = interleave(
        max(50, requests // 4),
        10,
        **{"bare httpx.Client.get": bare, "call_tool('web_fetch') + audit": audited},
    )
    report(
        "the same through call_tool (validation + audit row, SQLite)",
        audit,
        "bare httpx.Client.get",
        None,
    )
    server.shutdown()


def bench_sandbox(runs: int) -> None:
    from openhive.core import cgroups, sandbox

    workspace = WORK / "sandbox-ws"
    workspace.mkdir(parents=True, exist_ok=True)
    bwrap = sandbox.bwrap_path()
    if bwrap is None:
        print("\nsandbox: bubblewrap is not installed; skipped (apt-get install -y bubblewrap)")
        return

    def bare() -> None:
        subprocess.run(["/bin/true"], check=True)

    def bwrap_alone() -> None:
        subprocess.run(
            [
                bwrap,
                "--ro-bind",
                "/usr",
                "/usr",
                "--symlink",
                "usr/bin",
                "/bin",
                "--symlink",
                "usr/lib",
                "/lib",
                "--symlink",
                "usr/lib64",
                "/lib64",
                "--unshare-all",
                "--unshare-user",
                "--die-with-parent",
                "/bin/true",
            ],
            check=True,
        )

    def sandboxed() -> None:
        result = sandbox.run(["/bin/true"], workspace=workspace, timeout=10)
        assert result.ok, result

    times = interleave(
        runs,
        10,
        **{
            "bare subprocess.run(true)": bare,
            "sandbox.run(true)": sandboxed,
            "bwrap alone (no limits, breakdown)": bwrap_alone,
        },
    )
    print(f"\n(process cap by: {cgroups.describe()})")
    report("sandboxed `true` beside a bare subprocess", times, "bare subprocess.run(true)", 15.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--runs", type=int, default=200)
    options = parser.parse_args()
    try:
        bench_web(options.requests)
        bench_sandbox(options.runs)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()

"""What the MCP client adds to a tool call: the same call to a warm `mcp-server-time` (stdio,
from the package registry) made directly with the SDK's ClientSession, and made as a team
through the tool door, interleaved so a busy machine slows both alike.

    uv run python benchmarks/mcp_call.py [--calls 300]

Baseline: `ClientSession.call_tool` awaited inside a running asyncio loop, timed around the
await alone (the least any caller pays; its own server process, started and warmed first);
beside it the same call with the loop driven per call from sync code (`run_until_complete`).
The goal is judged against the faster of the two baselines.
Measured: `call_tool(ctx, "mcp__time__get_current_time", ...)` as the team's session calls it
(team config, server definition and vault lookups, the hop to the client loop thread, result
rendering and scrubbing, the audit row in a SQLite database), with the manager's call alone
(the loop hop) as a breakdown. Goal: <= 3 ms p50 added by the call through the team.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="openhive-bench-"))
os.environ["OPENHIVE_DATA_DIR"] = str(WORK / "data")
os.environ["OPENHIVE_RUN_DIR"] = str(WORK / "run")
os.environ.pop("DATABASE_URL", None)  # the audit row goes to a throwaway SQLite file
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
ARGS = {"timezone": "Europe/Paris"}


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def interleave(n: int, warmup: int, **cases: Callable[[], object]) -> dict[str, list[float]]:
    """Run the cases in turn, n times each after a warm-up; milliseconds. A case that returns
    a number measured itself (in seconds) and that figure is used."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases.items())
    for round_ in range(warmup + n):
        # Rotated each round, so no case always follows the same neighbour (a neighbour's
        # disk write or wake-up would otherwise land on one case only).
        shift = round_ % len(order)
        for name, case in order[shift:] + order[:shift]:
            started = time.perf_counter()
            own = case()
            elapsed = own if isinstance(own, float) else time.perf_counter() - started
            if round_ >= warmup:
                times[name].append(elapsed * 1000)
    return times


class DirectClient:
    """The SDK used directly: a task holds the session open on a loop this thread drives."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.session = None
        self.stop = asyncio.Event()
        self.ready = self.loop.create_future()
        self.holder = self.loop.create_task(self._hold())
        self.loop.run_until_complete(self.ready)

    async def _hold(self) -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command="mcp-server-time", env={"PATH": os.environ["PATH"]})
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                self.session = s
                self.ready.set_result(None)
                await self.stop.wait()
        except BaseException as exc:
            # Without this the constructor would wait on `ready` for ever.
            if not self.ready.done():
                self.ready.set_exception(exc)
            raise

    def call(self) -> None:
        result = self.loop.run_until_complete(self.session.call_tool("get_current_time", ARGS))
        assert not result.is_error

    def call_in_loop(self) -> float:
        """The await alone, timed inside the running loop: the least any caller can pay."""

        async def timed() -> float:
            started = time.perf_counter()
            result = await self.session.call_tool("get_current_time", ARGS)
            assert not result.is_error
            return time.perf_counter() - started

        return self.loop.run_until_complete(timed())

    def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(self.holder)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    calls = parser.parse_args().calls
    if shutil.which("mcp-server-time") is None:
        sys.exit(
            "mcp-server-time is not on PATH: run `uv sync` and start this with `uv run` "
            "(it is a dev dependency, installed in the project's .venv/bin)"
        )

    import django

    django.setup()
    from django.core.management import call_command

    from openhive.core import paths
    from openhive.core.context import ToolContext
    from openhive.core.registry import team_tools
    from openhive.engine.tool_calls import call_tool
    from openhive.tools.mcpclient.servers import server_plan, team_server_configs
    from openhive.tools.mcpclient.source import manager
    from teams.config import default_config, write_team_config
    from teams.models import Team
    from teams.services import team_ensure_main, team_workspace_scaffold

    call_command("migrate", verbosity=0)
    main_team = team_ensure_main()
    team, _ = Team.objects.get_or_create(name="bench", defaults={"parent": main_team})
    team_workspace_scaffold(paths.team_dir("bench"))
    config = default_config("bench", parent="main").model_copy(
        update={"allowed_tools": ["mcp__time__*"]}
    )
    config = config.model_validate(
        {**config.model_dump(), "mcp_servers": {"time": {"command": "mcp-server-time"}}}
    )
    write_team_config(config)

    started = time.perf_counter()
    offered = {spec.name: spec for spec in team_tools(team, config.allowed_tools)}
    print(
        f"first use: started mcp-server-time and listed its tools in "
        f"{(time.perf_counter() - started) * 1000:.0f} ms"
    )
    ctx = ToolContext(team=team, actor="bench", allowed_tools=config.allowed_tools, tools=offered)
    plan = server_plan(team, "time", team_server_configs("bench")["time"])
    direct = DirectClient()

    def through_team() -> None:
        result = call_tool(ctx, "mcp__time__get_current_time", ARGS)
        assert result["success"], result

    def manager_only() -> None:
        assert not manager().call(plan, "get_current_time", ARGS).is_error

    times = interleave(
        calls,
        30,
        **{
            "SDK ClientSession.call_tool": direct.call_in_loop,
            "SDK call, loop driven per call": direct.call,
            "manager.call (loop hop only)": manager_only,
            "call_tool as the team + audit": through_team,
        },
    )
    direct.close()
    manager().shutdown()
    baselines = ("SDK ClientSession.call_tool", "SDK call, loop driven per call")
    # The goal is judged against the faster of the two ways of using the SDK directly.
    base_name = min(baselines, key=lambda name: statistics.median(times[name]))
    base = statistics.median(times[base_name])
    print(f"\nAn MCP tool call on a warm stdio server ({calls} calls each, interleaved)")
    print(f"  {'case':<34} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>9}")
    for name, values in times.items():
        added = statistics.median(values) - base
        shown = "" if name == base_name else f"{added:+9.3f}"
        print(f"  {name:<34} {statistics.median(values):>8.3f} {pct(values, 99):>8.3f} {shown}")
    added = statistics.median(times["call_tool as the team + audit"]) - base
    verdict = "meets" if added <= 3.0 else "MISSES"
    print(
        f"  goal: <= 3 ms p50 added by the call through the team over {base_name!r}: "
        f"{added:.3f} ms, {verdict} it"
    )


if __name__ == "__main__":
    main()

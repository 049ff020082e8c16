"""What a plugin call costs: `plugin__add` through `call_tool` (the team's plugin row, the file
read and checked against its SHA-256, the argument schema, the sandbox — bubblewrap, rlimits,
cgroup —, the stdlib harness, the JSON envelope and the audit row) beside a bare
`python3 -c pass`, measured interleaved in the same run so a busy machine slows both alike.

    uv run python benchmarks/plugin_call.py [--runs 100]

Also shown, as a breakdown: the sandbox around `/bin/true` (bubblewrap, limits, cgroup) and
the sandboxed harness alone (`run_in_sandbox`, no database).
Goal: <= 25 ms p50 added by the plugin call over the bare interpreter start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="openhive-bench-plugin-"))
os.environ["OPENHIVE_DATA_DIR"] = str(WORK / "data")
os.environ.pop("DATABASE_URL", None)  # a throwaway SQLite file
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
GOAL_MS = 25.0

ADD = """
DESCRIPTION = "Add two numbers"
PARAMETERS = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


def run(args):
    return {"sum": args["a"] + args["b"]}
"""


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    runs = parser.parse_args().runs
    if shutil.which("bwrap") is None:
        print("bubblewrap is not installed; plugins cannot run (apt-get install -y bubblewrap)")
        return

    import django

    django.setup()
    from django.core.management import call_command

    from openhive.core import paths, sandbox
    from openhive.core.context import ToolContext
    from openhive.core.registry import team_tools
    from openhive.engine.tool_calls import call_tool
    from openhive.tools.plugins.runner import plugin_python, run_in_sandbox
    from openhive.tools.plugins.services import plugin_register
    from teams.config import default_config, write_team_config
    from teams.models import Team
    from teams.services import team_ensure_main, team_workspace_scaffold

    call_command("migrate", verbosity=0)
    main_team = team_ensure_main()
    team, _ = Team.objects.get_or_create(name="bench", defaults={"parent": main_team})
    team_workspace_scaffold(paths.team_dir("bench"))
    write_team_config(default_config("bench", parent="main"))
    plugin_register(team=team, tool_name="add", source_code=ADD, registered_by="bench")
    offered = {spec.name: spec for spec in team_tools(team, ["plugin__*"])}
    ctx = ToolContext(team=team, actor="bench", allowed_tools=["plugin__*"], tools=offered)
    python, _ = plugin_python()
    workspace = paths.team_dir("bench")

    def bare() -> None:
        subprocess.run([python, "-c", "pass"], check=True)

    def sandbox_true() -> None:
        assert sandbox.run(["/bin/true"], workspace=workspace, timeout=10).ok

    def harness_only() -> None:
        run = run_in_sandbox(mode="run", name="add", source=ADD, workspace=workspace, args={"a": 1})
        assert run.envelope is not None, run

    def plugin_call() -> None:
        result = call_tool(ctx, "plugin__add", {"a": 1, "b": 2})
        assert result["success"] and result["result"]["sum"] == 3, result

    times = interleave(
        runs,
        5,
        **{
            f"bare {python} -c pass": bare,
            "sandbox.run(['/bin/true']) (breakdown)": sandbox_true,
            "run_in_sandbox (no database)": harness_only,
            "call_tool('plugin__add') + audit": plugin_call,
        },
    )
    baseline = f"bare {python} -c pass"
    base = statistics.median(times[baseline])
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"plugin call vs a bare interpreter start ({runs} runs each, interleaved)")
    print(f"  load average (1/5/15 min): {load} on {os.cpu_count()} CPUs")
    print(f"  {'case':<40} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>9}")
    for name, values in times.items():
        added = statistics.median(values) - base
        print(
            f"  {name:<40} {statistics.median(values):>8.2f} {pct(values, 99):>8.2f} "
            f"{'' if name == baseline else f'{added:+9.2f}'}"
        )
    added = statistics.median(times["call_tool('plugin__add') + audit"]) - base
    verdict = "meets" if added <= GOAL_MS else "MISSES"
    print(f"  goal: <= {GOAL_MS:g} ms p50 added by a plugin call: {added:.2f} ms, {verdict} it")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()

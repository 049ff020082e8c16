"""query_teams fan-out: 5 child teams whose one model turn takes 1 s (scripted `delay_ms`).

    uv run python benchmarks/fanout_query_teams.py [--children 5] [--delay-ms 1000] [--runs 3]

Runs on the configured database (DATABASE_URL=postgres://... for PostgreSQL; a throwaway
database is created there and dropped after; SQLite otherwise, in a temp dir). Prints the wall
time of `query_teams` (goal, issue 19: <= 1.1 s for 5 x 1 s) beside the same five queries made
one after the other with `query_team` in the same run (the serial baseline: about the sum).
The first fan-out of a process starts its threads and database connections; later ones find
them waiting (OPENHIVE_QUERY_THREAD_IDLE_SECONDS): its time is printed on its own too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from harness import throwaway_django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--children", type=int, default=5)
    parser.add_argument("--delay-ms", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    with throwaway_django("openhive-fanout-") as (data, vendor):
        (data / "scripts" / "fanout.yaml").write_text(
            "rules:\n"
            f"  - when: {{team: main}}\n    reply: {{content: main}}\n"
            f"  - when: {{}}\n    reply: {{content: answer, delay_ms: {args.delay_ms}}}\n"
        )
        (data / "config" / "providers.yaml").write_text(
            "profiles:\n  default: {model: scripted/fanout.yaml}\n"
        )
        run(args, vendor)


def run(args: argparse.Namespace, vendor: str) -> None:
    from openhive.core.context import ToolContext
    from openhive.engine.llm import get_litellm
    from openhive.engine.tool_calls import call_tool
    from openhive.org.services import team_spawn
    from teams.services import team_ensure_main

    get_litellm()
    main = team_ensure_main()
    names = [f"child-{i}" for i in range(args.children)]
    for name in names:
        team_spawn(parent=main, name=name, scope_accepts=["bench"])
    ctx = ToolContext(team=main, actor="bench")
    fan, serial = [], []
    for _ in range(args.runs):
        started = time.monotonic()
        result = call_tool(
            ctx,
            "query_teams",
            json.dumps({"targets": [{"team": n, "query": "status?"} for n in names]}),
        )
        fan.append(time.monotonic() - started)
        assert all(r["ok"] for r in result["results"]), result
        started = time.monotonic()
        for n in names:
            single = call_tool(ctx, "query_team", json.dumps({"team": n, "query": "status?"}))
            assert single["success"], single
        serial.append(time.monotonic() - started)
    ideal = args.delay_ms / 1000
    f, s = statistics.median(fan), statistics.median(serial)
    print(f"database: {vendor}; {args.children} children x {ideal:.1f} s model turn; "
          f"median of {args.runs} runs")  # fmt: skip
    print(f"query_teams (parallel): {f:.3f} s   (ideal {ideal:.1f} s: {f / ideal:.2f}x; "
          f"goal <= {ideal * 1.1:.2f} s: {'met' if f <= ideal * 1.1 else 'NOT met'})")  # fmt: skip
    print(f"first fan-out (threads and connections new): {fan[0]:.3f} s")
    print(f"query_team x{args.children} (serial baseline): {s:.3f} s")
    print(f"speed-up: {s / f:.2f}x; fan-out overhead over one child: {f - ideal:.3f} s; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()

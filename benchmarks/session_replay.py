"""Replay and per-step overhead of a long session (scripted provider, no network).

    uv run python benchmarks/session_replay.py [--steps 50] [--rounds 5]

1. Records a session of `--steps` model calls (49 tool calls, then the answer) and replays it
   (`engine.replay`, rolled back): goal <= 2 s for 50 steps. Baseline: recording the same
   session in the same run.
2. The step overhead of budgets (estimate + spend query before each call, a team budget and
   the org cap set), accounting and tracing (OpenTelemetry SDK, no exporter) against the same
   session with them off (no budget set, tracing disabled): goal <= 5 % of a step. The runs
   alternate on and off (which goes first alternates too), `--rounds` each; medians are
   compared. With no exporter the SDK drops spans when they are made (their ids still flow);
   `BENCH_RECORD=1` records them as an exporter would. `BENCH_ONLY=budgets|tracing` switches
   one part only; `BENCH_PROFILE=1` prints where a step's time goes, on against off;
   `BENCH_DRIFT=1` prints each session's CPU per step, off and on in turn.

Runs on the configured database (DATABASE_URL=postgres://... makes and drops a throwaway
database; SQLite otherwise, in a temp dir).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from harness import throwaway_django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with throwaway_django("openhive-replay-") as (data, vendor):
        (data / "scripts" / "long.yaml").write_text(
            "rules:\n"
            f"  - when: {{}}\n    times: {args.steps - 1}\n"
            "    reply: {tool_calls: [{name: list_teams}], usage: {prompt_tokens: 900, "
            "completion_tokens: 20, cost_usd: 0.001}}\n"
            "  - when: {}\n    reply: {content: done, usage: {prompt_tokens: 900}}\n"
        )
        (data / "config" / "providers.yaml").write_text(
            "profiles:\n  default: {model: scripted/long.yaml}\n"
        )
        run(args, vendor, data)


def _session(steps: int):
    from teams.agent import run_team_session
    from teams.selectors import team_get

    team = team_get(name="ops")
    started, cpu = time.perf_counter(), time.process_time()
    outcome = run_team_session(team, "go", max_turns=steps + 5)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert outcome.ok, outcome.error
    return outcome, (elapsed, cpu)


def _reset_script_counts() -> None:
    from openhive.engine import scripted

    scripted.forget_uses()


def _profile_difference(steps: int, mode) -> None:
    """BENCH_PROFILE=1: where the time of a step goes with everything on, against off."""
    import cProfile
    import pstats

    totals = {}
    for flag in (False, True):
        mode(flag)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(3):
            mode(flag)
            _session(steps)
        profiler.disable()
        stats = pstats.Stats(profiler).stats
        totals[flag] = {f"{k[0].split('/')[-1]}:{k[2]}": v[3] for k, v in stats.items()}
    keys = {k for k in set(totals[True]) | set(totals[False]) if "openhive" in k or ".py" in k}
    diffs = sorted(keys, key=lambda k: totals[True].get(k, 0) - totals[False].get(k, 0))
    for key in reversed(diffs[-40:]):
        on, off = totals[True].get(key, 0), totals[False].get(key, 0)
        print(f"{(on - off) / (3 * steps) * 1e6:8.1f} us/step  {key}")


def run(args: argparse.Namespace, vendor: str, data: Path) -> None:
    from openhive.cli.replay import replay_options
    from openhive.engine import tracing
    from openhive.engine.llm import get_litellm
    from openhive.engine.models import LlmExchange, Session
    from openhive.engine.replay import replay_session
    from openhive.org.services import team_spawn
    from teams.config import load_team_config, write_team_config
    from teams.services import team_ensure_main

    get_litellm()
    main = team_ensure_main()
    team_spawn(parent=main, name="ops", scope_accepts=["bench"])
    config = load_team_config("ops")
    plain = config.model_copy()
    budgeted = config.model_copy(
        update={
            "budgets": config.budgets.model_copy(
                update={"task_tokens": 10**9, "daily_tokens": 10**9, "daily_usd": 10**6}
            )
        }
    )
    org_cap = data / "config" / "budgets.yaml"

    # BENCH_ONLY=budgets|tracing: switch only that part (to see which costs what).
    only = os.environ.get("BENCH_ONLY", "")
    if os.environ.get("BENCH_RECORD"):
        # As if an exporter were configured: spans recorded and handed to a processor (which
        # throws them away), instead of dropped at creation.
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

        class Discard(SpanExporter):
            def export(self, spans):  # type: ignore[override]
                return None

        tracing.add_span_processor(SimpleSpanProcessor(Discard()))

    def mode(on: bool) -> None:
        budgets_on = on and only != "tracing"
        write_team_config(budgeted if budgets_on else plain)
        if budgets_on:
            org_cap.write_text("org: {daily_tokens: 1000000000, daily_usd: 1000000}\n")
        else:
            org_cap.unlink(missing_ok=True)
        tracing.set_enabled(on and only != "budgets")
        _reset_script_counts()

    # Warm up (imports, caches), then record the session to replay.
    mode(True)
    _session(args.steps)
    mode(True)
    recorded, (record_time, _) = _session(args.steps)
    steps = LlmExchange.objects.filter(session_id=recorded.session_id).count()
    session = Session.objects.select_related("team").get(pk=recorded.session_id)
    replays = []
    for _ in range(3):
        started = time.perf_counter()
        report = replay_session(session, **replay_options())
        replays.append(time.perf_counter() - started)
        assert report.identical, report.divergence and report.divergence.describe()

    if os.environ.get("BENCH_DRIFT"):  # one line per session, off and on in turn
        for number in range(8):
            mode(number % 2 == 1)
            _, (_, cpu) = _session(args.steps)
            label = "on" if number % 2 else "off"
            print(f"session {number} ({label}): CPU per step {cpu / args.steps * 1000:.2f} ms")
        return
    if os.environ.get("BENCH_PROFILE"):
        _profile_difference(args.steps, mode)
        return
    on, off = [], []
    for number in range(args.rounds):
        # Alternate which goes first, so a drift (a growing table) favours neither.
        order = ((False, off), (True, on)) if number % 2 == 0 else ((True, on), (False, off))
        for flag, bucket in order:
            mode(flag)
            _, (elapsed, cpu) = _session(args.steps)
            bucket.append((elapsed / args.steps, cpu / args.steps))
    # Wall time suffers from every other process on a shared machine; the CPU time this
    # process spent per step is the steadier measure of the work added.
    wall_on, wall_off = (statistics.median(x[0] for x in b) for b in (on, off))
    cpu_on, cpu_off = (statistics.median(x[1] for x in b) for b in (on, off))

    print(f"database: {vendor}; a recorded session of {steps} model calls")
    print(
        f"replay: {statistics.median(replays):.3f} s (median of 3; goal <= 2 s); "
        f"recording it took {record_time:.3f} s (baseline, same run)"
    )
    print(
        f"step with budgets + accounting + tracing (no exporter): CPU {cpu_on * 1000:.2f} ms, "
        f"wall {wall_on * 1000:.2f} ms; with them off: CPU {cpu_off * 1000:.2f} ms, wall "
        f"{wall_off * 1000:.2f} ms (median of {args.rounds} sessions each)"
    )
    print(
        f"overhead: {(cpu_on - cpu_off) / cpu_off * 100:+.1f} % of a step's CPU time "
        f"({(wall_on - wall_off) / wall_off * 100:+.1f} % of its wall time) (goal <= 5 %)"
    )


if __name__ == "__main__":
    main()

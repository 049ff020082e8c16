"""A subagent's child session beside a plain session of the same steps (scripted provider, no
network).

    uv run python benchmarks/subagent_session.py [--steps 20] [--rounds 7]

Measured: `run_subagent` called as a tool by an orchestrator's session (load and check the
subagent file, narrow the tools, build its prompt, open a linked child session, run
`--steps` model calls: `--steps - 1` tool calls then the answer, return the final text).
Baseline, in the same run: a plain session of the team with the same steps. The runs
alternate (which goes first alternates too), `--rounds` each; medians are compared.
Goal: the child session <= 1.2x the plain session.

Runs on the configured database (DATABASE_URL=postgres://... makes and drops a throwaway
database; SQLite otherwise, in a temp dir).
"""

from __future__ import annotations

import argparse
import statistics
import time

from harness import throwaway_django

GOAL = 1.2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    with throwaway_django("openhive-subagent-") as (data, vendor):
        tool_call = (
            "{tool_calls: [{name: list_teams}], usage: {prompt_tokens: 900, completion_tokens: 20}}"
        )
        # The same steps for the team and for its subagent: `times` counts per rule, and the
        # counts are reset before every session.
        (data / "scripts" / "steps.yaml").write_text(
            "rules:\n"
            f"  - when: {{team: ops/worker}}\n    times: {args.steps - 1}\n    reply: {tool_call}\n"
            "  - when: {team: ops/worker}\n    reply: {content: done}\n"
            f"  - when: {{team: ops}}\n    times: {args.steps - 1}\n    reply: {tool_call}\n"
            "  - when: {team: ops}\n    reply: {content: done}\n"
        )
        (data / "config" / "providers.yaml").write_text(
            "profiles:\n  default: {model: scripted/steps.yaml}\n"
        )
        run(args, vendor)


def run(args: argparse.Namespace, vendor: str) -> None:
    from openhive.core import paths
    from openhive.core.context import ToolContext
    from openhive.engine import scripted
    from openhive.engine.lineage import Origin, running
    from openhive.engine.llm import get_litellm
    from openhive.engine.models import LlmExchange, Session
    from openhive.engine.tool_calls import call_tool
    from openhive.org.services import team_spawn
    from teams.agent import run_team_session
    from teams.services import team_ensure_main

    get_litellm()
    ops = team_spawn(parent=team_ensure_main(), name="ops", scope_accepts=["bench"]).team
    (paths.team_dir("ops") / "subagents" / "worker.md").write_text(
        # No `tools:` list: the child is offered what the team is, so both sessions send
        # requests of the same size and the difference is the subagent's own overhead.
        "---\ndescription: Does the work\n---\nYou are the worker of the ops team.\n"
    )
    parent = Session.objects.create(team=ops, kind=Session.Kind.TASK)
    ctx = ToolContext(team=ops, session_id=parent.pk)

    def plain() -> float:
        scripted.forget_uses()
        started = time.perf_counter()
        outcome = run_team_session(ops, "go")
        elapsed = time.perf_counter() - started
        assert outcome.ok, outcome.error
        steps = LlmExchange.objects.filter(session_id=outcome.session_id).count()
        assert steps == args.steps, steps
        return elapsed

    def child() -> float:
        scripted.forget_uses()
        started = time.perf_counter()
        with running(Origin(parent.pk, None)):
            result = call_tool(ctx, "run_subagent", {"name": "worker", "task": "go"})
        elapsed = time.perf_counter() - started
        assert result["success"], result
        session = Session.objects.get(pk=result["session_id"])
        assert session.parent_session_id == parent.pk and session.agent_name == "worker"
        assert session.exchanges.count() == args.steps
        return elapsed

    plain(), child()  # warm up: imports, caches, the tokenizer
    plains, children = [], []
    for number in range(args.rounds):
        order = (plain, child) if number % 2 == 0 else (child, plain)
        for measure in order:
            (plains if measure is plain else children).append(measure())
    p50_plain, p50_child = statistics.median(plains), statistics.median(children)
    ratio = p50_child / p50_plain
    print(f"database: {vendor}; {args.steps} steps per session, {args.rounds} rounds")
    print(f"baseline  plain team session:        p50 {p50_plain * 1000:8.1f} ms")
    print(f"measured  subagent child session:    p50 {p50_child * 1000:8.1f} ms (run_subagent)")
    print(f"ratio {ratio:.3f}x (goal <= {GOAL}x): {'MET' if ratio <= GOAL else 'NOT MET'}")


if __name__ == "__main__":
    main()

"""Per-step overhead of a session against a bare litellm tool loop, measured in the same run.

    uv run python benchmarks/session_step.py [--steps 10,50,200] [--seconds 30]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x uv run python benchmarks/session_step.py

The scenario the peers' benchmarks use: one agent, one tool `add(a, b)`, a zero-cost model (the
scripted provider, through litellm) that makes K tool calls and then answers. Per-step time is
wall / (K + 1) model calls. The modes are interleaved session by session: a round runs one
session of each (the order turning from round to round), and rounds go on for about --seconds
at each K (at least --rounds). Three ways to run it beside the baseline:
  - bare: `litellm.completion` in a loop, the tool called in-process (the baseline);
  - chat: the engine's session as a chat turn of the team (kind chat, events to a sink);
  - task: a queued task, claimed and run by `run_task` as a django-q2 worker does (told the
    task's team, as the dispatcher tells it);
  - pull: a queued task, claimed and run by `run_next_task` as `manage.py openhive worker` does.
Goals (issue 19): every mode <= 1.5x the bare loop; flat in history: per step at K = 200
<= 1.3x per step at K = 10 (each mode's line also divides its growth by the bare loop's, whose
litellm calls themselves grow dearer with the history). With two K or more it also splits each
mode's session, from the two smallest K, into what each further model call adds to the overhead
and what the session costs once. At each K it prints the queue's own work in a task (its
enqueue and its claim, timed inside the task-mode sessions) over the bare session's time, and
chat's ratio plus that: a floor under the task mode's ratio, however little the rest of its
session cost. At the smallest K it runs the task mode again beside the bare loop, as it is and
with its loop on the claiming thread: what the watched handover (the loop on a pooled thread, so
that a cancel can abandon a hung model call) costs a task session.

Wall time is the measure. On a shared machine other processes' load stretches the engine's
thread handoffs and database round trips more than the bare loop's pure Python, so each line
also gives this process's CPU time per step and its ratio (the database server's CPU, on
PostgreSQL, is not in it), and the load average is printed. Each K also gives each mode's time
in database queries a session (this process waiting on its round trips and the server's work).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable

from db_floors import commit_floor, round_trip_floor, wait_cost
from harness import throwaway_django
from pydantic import BaseModel

SCRIPT = "step.yaml"
MODES = ("bare", "chat", "task", "pull")


class AddArgs(BaseModel):
    a: float
    b: float


def add(ctx, args: AddArgs) -> dict:
    return {"success": True, "sum": args.a + args.b}


def write_script(data, steps: int) -> None:
    call = "{tool_calls: [{name: add, arguments: {a: 1, b: 2}}], usage: {prompt_tokens: 0}}"
    (data / "scripts" / SCRIPT).write_text(
        "rules:\n"
        f"  - when: {{}}\n    times: {steps}\n    reply: {call}\n"
        "  - when: {}\n    reply: {content: done, usage: {prompt_tokens: 0}}\n"
    )


def reset_script() -> None:
    from openhive.engine import scripted

    scripted.forget_uses()


def bare(steps: int, schema: dict) -> float:
    from openhive.engine.llm import get_litellm, price_scripted_model

    litellm = get_litellm()
    price_scripted_model(f"scripted/{SCRIPT}")  # as the engine does: no failed pricing per call
    messages = [{"role": "system", "content": "You add."}, {"role": "user", "content": "go"}]
    started = time.perf_counter()
    calls = 0
    while True:
        response = litellm.completion(
            model=f"scripted/{SCRIPT}", messages=messages, tools=[schema], max_retries=0
        )
        calls += 1
        message = response.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        if not message.get("tool_calls"):
            break
        for call in message["tool_calls"]:
            arguments = AddArgs(**json.loads(call["function"]["arguments"]))
            result = add(None, arguments)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})
    elapsed = time.perf_counter() - started
    assert calls == steps + 1, calls
    return elapsed / calls


# Seconds this process spent in its database queries (their round trips and the server's
# work), and how many it sent (each one round trip), summed by a wrapper on the connection,
# which the session's loop thread borrows too.
DB_SECONDS = [0.0]
DB_TRIPS = [0]


def _timed_query(execute, sql, params, many, context):
    started = time.perf_counter()
    try:
        return execute(sql, params, many, context)
    finally:
        DB_SECONDS[0] += time.perf_counter() - started
        DB_TRIPS[0] += 1


def _db_mark() -> tuple[float, int]:
    return DB_SECONDS[0], DB_TRIPS[0]


def _db_since(mark: tuple[float, int]) -> tuple[float, int]:
    return DB_SECONDS[0] - mark[0], DB_TRIPS[0] - mark[1]


def chat(steps: int, team) -> tuple[float, tuple[float, int]]:
    from openhive.engine.models import Session
    from teams.agent import run_team_session

    events: list[dict] = []
    started, mark = time.perf_counter(), _db_mark()
    outcome = run_team_session(
        team, "go", kind=Session.Kind.CHAT, on_event=events.append, max_turns=steps + 5
    )
    elapsed, db = time.perf_counter() - started, _db_since(mark)
    assert outcome.ok, outcome.error
    return elapsed / (steps + 1), db


# The queue's own work in each task-mode session, timed inside it: its enqueue and its claim
# (seconds), for the floor line (`_queue_floor`).
QUEUE_WORK: dict[str, list[float]] = {"enqueue": [], "claim": []}


def _timing_claims() -> None:
    """Time `run_task`'s claim where it is made, by the runner's own names for it: the named
    claim (PostgreSQL) or the team's claim (SQLite)."""
    from tasks import runner

    def timed(claim):
        def claiming(**kwargs):
            started = time.perf_counter()
            try:
                return claim(**kwargs)
            finally:
                QUEUE_WORK["claim"].append(time.perf_counter() - started)

        return claiming

    runner.task_claim_named = timed(runner.task_claim_named)
    runner.task_claim_next = timed(runner.task_claim_next)


def task(steps: int, team) -> tuple[float, tuple[float, int]]:
    from tasks.models import Task
    from tasks.runner import run_task
    from tasks.services import task_enqueue

    started, mark = time.perf_counter(), _db_mark()
    queued = task_enqueue(team=team, text="go")
    QUEUE_WORK["enqueue"].append(time.perf_counter() - started)
    run_task(queued.pk, team.pk, team.name)  # as the dispatcher hands it out
    elapsed, db = time.perf_counter() - started, _db_since(mark)
    status = Task.objects.values_list("status", flat=True).get(pk=queued.pk)
    assert status == Task.Status.DONE, status
    return elapsed / (steps + 1), db


def pull(steps: int, team) -> tuple[float, tuple[float, int]]:
    """The pull worker's way (`manage.py openhive worker`): claim the most urgent task, run it."""
    from tasks.models import Task
    from tasks.runner import run_next_task
    from tasks.services import task_enqueue

    started, mark = time.perf_counter(), _db_mark()
    queued = task_enqueue(team=team, text="go")
    run_next_task("bench")
    elapsed, db = time.perf_counter() - started, _db_since(mark)
    status = Task.objects.values_list("status", flat=True).get(pk=queued.pk)
    assert status == Task.Status.DONE, status
    return elapsed / (steps + 1), db


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", default="10,50,200")
    parser.add_argument("--rounds", type=int, default=7, help="at least this many rounds")
    parser.add_argument(
        "--seconds",
        type=float,
        default=30,
        help="each K runs rounds (one session of each mode) for about this long",
    )
    args = parser.parse_args()
    ks = [int(k) for k in args.steps.split(",")]

    with throwaway_django("openhive-step-") as (data, vendor):
        from django.db import connection

        team, schema = prepare(data)
        connection.execute_wrappers.append(_timed_query)
        _timing_claims()

        print(
            f"database: {vendor}; per step = wall / (K + 1) model calls; medians over rounds "
            f"of one session of each mode (~{args.seconds:g} s a K); load average {_load()}"
        )
        results: dict[tuple[str, int], float] = {}
        cpu: dict[tuple[str, int], float] = {}
        for k in ks:
            write_script(data, k)
            for mode in MODES:  # warm-up
                _run(mode, k, team, schema)
            # One session of each mode a round, so that the two sessions of a pair run a few
            # ms apart: on a shared VM the machine's speed drifts by a quarter within a
            # minute, and samples a second apart compared the drift as much as the modes.
            one_round = sum(_run(mode, k, team, schema)[0] for mode in MODES) * (k + 1)
            rounds = max(args.rounds, math.ceil(args.seconds / one_round))
            samples: dict[str, list[tuple[float, float, float, int]]] = {mode: [] for mode in MODES}
            for work in QUEUE_WORK.values():
                work.clear()
            for number in range(rounds):
                order = list(MODES)
                for mode in order[number % 4 :] + order[: number % 4]:
                    samples[mode].append(_run(mode, k, team, schema))
            for mode, values in samples.items():
                results[(mode, k)] = statistics.median(v[0] for v in values)
                cpu[(mode, k)] = statistics.median(v[1] for v in values)
            base, base_cpu = results[("bare", k)], cpu[("bare", k)]
            print(
                f"K={k:>4}: bare {base * 1000:6.2f} ms/step (CPU {base_cpu * 1000:.2f}); "
                f"{rounds} rounds"
            )
            for mode in MODES[1:]:
                wall, used = results[(mode, k)], cpu[(mode, k)]
                paired = _paired_ratio(samples[mode], samples["bare"])
                print(
                    f"        {mode}: {wall * 1000:6.2f} ms/step, overhead "
                    f"{(wall - base) * 1000:+.2f} ms; {paired:.2f}x bare round by round "
                    f"(goal <= 1.5x: {'met' if paired <= 1.5 else 'NOT met'}), "
                    f"{wall / base:.2f}x of the medians; CPU {used * 1000:.2f} ms "
                    f"= {used / base_cpu:.2f}x bare"
                )
            waits = ", ".join(
                f"{mode} {statistics.median(v[2] for v in samples[mode]) * 1000:.2f}"
                for mode in MODES[1:]
            )
            print(f"        time in database queries, ms a session: {waits}")
            trips = ", ".join(f"{mode} {samples[mode][-1][3]}" for mode in MODES[1:])
            print(f"        database round trips a session: {trips}")
            print(f"        {_queue_floor(samples, k)}")
            if k == min(ks):
                print(f"        {round_trip_floor(base * (k + 1))}")
                if vendor == "postgresql":
                    print(f"        {commit_floor(base * (k + 1))}")
                print(f"        {wait_cost(_one_bare_call(schema), base * (k + 1) * 1000)}")
                print(f"        {_handover_share(k, team, schema, max(args.rounds, rounds // 2))}")
        if len(ks) > 1:
            low, high = min(ks), max(ks)
            growth = results[("bare", high)] / results[("bare", low)]
            for mode in MODES:
                ratio = results[(mode, high)] / results[(mode, low)]
                # litellm's own work per call grows with the history (it copies and checks
                # every message at every call): the mode's growth over the bare loop's is
                # the part the engine adds.
                own = "" if mode == "bare" else f"; over the bare loop's {ratio / growth:.2f}x"
                print(
                    f"flat in history, {mode}: K={high} / K={low} per step = {ratio:.2f}x "
                    f"(goal <= 1.3x: {'met' if ratio <= 1.3 else 'NOT met'}){own}"
                )
            _print_fixed_and_marginal(results, sorted(ks)[:2])
        print(f"load average at the end: {_load()}")


def prepare(data) -> tuple:
    """The scenario in a migrated database: the `add` tool, the scripted provider, the team
    "adder" allowed that tool (made once, found again by a later process). Returns the team and
    the tool's schema."""
    from openhive.core.registry import get_tool, tool
    from openhive.engine.llm import get_litellm
    from teams.config import default_config, write_team_config
    from teams.models import Team
    from teams.services import team_ensure_main

    tool(name="add", description="Add two numbers.", args=AddArgs)(add)
    schema = get_tool("add").function_schema()
    (data / "config" / "providers.yaml").write_text(
        f"profiles:\n  default: {{model: scripted/{SCRIPT}}}\n"
    )
    main_team = team_ensure_main()
    team, _ = Team.objects.get_or_create(
        name="adder", defaults={"parent": main_team, "bootstrapped": True}
    )
    config = default_config("adder", parent="main")
    write_team_config(config.model_copy(update={"allowed_tools": ["add"], "max_turns": 500}))
    get_litellm()
    return team, schema


def _print_fixed_and_marginal(results: dict[tuple[str, int], float], ks: list[int]) -> None:
    """A diagnosis, not a goal: a mode's overhead over the bare loop (session wall minus the
    bare loop's at the same K, which takes out litellm's own cost of a longer history), split
    from two K into what each further model call and its tool call add and what the session
    costs once (its row, its spec, its final write; for a task also the queue's enqueue, claim
    and end). At small K the once-only part weighs on the per-step ratio."""
    low, high = ks
    print(f"the overhead split, from K={low} and K={high} (overhead = once + (K + 1) x each):")
    for mode in MODES[1:]:
        small, large = ((results[(mode, k)] - results[("bare", k)]) * (k + 1) for k in (low, high))
        each = (large - small) / (high - low)
        once = small - each * (low + 1)
        print(
            f"        {mode}: each further call {each * 1000:+.2f} ms "
            f"({each / results[('bare', low)] * 100:.0f} % of a bare step at K={low}); "
            f"once per session {once * 1000:+.2f} ms"
        )


def _queue_floor(samples: dict[str, list[tuple[float, ...]]], k: int) -> str:
    """What the queue alone adds to a task over a chat turn: its enqueue and its claim (each a
    commit of its own; on PostgreSQL the enqueue's waits for the WAL flush), timed inside the
    task-mode sessions, over the bare session's time. A task session that cost no more than a
    chat turn otherwise would still sit at chat's ratio plus this: a floor under the task
    mode's ratio, whatever the session's own work costs."""
    enqueue = statistics.median(QUEUE_WORK["enqueue"])
    claim = statistics.median(QUEUE_WORK["claim"])
    bare_session = statistics.median(v[0] for v in samples["bare"]) * (k + 1)
    chat = _paired_ratio(samples["chat"], samples["bare"])
    added = (enqueue + claim) / bare_session
    return (
        f"the queue's own work in a task (median): enqueue {enqueue * 1000:.2f} ms + claim "
        f"{claim * 1000:.2f} ms = +{added:.2f}x the bare session; chat's {chat:.2f}x plus "
        f"that: a task-mode floor of {chat + added:.2f}x"
    )


def _one_bare_call(schema: dict) -> Callable[[], None]:
    """One model call of the bare loop (its first: the request of a new session)."""
    from openhive.engine.llm import get_litellm

    litellm = get_litellm()
    messages = [{"role": "system", "content": "You add."}, {"role": "user", "content": "go"}]

    def call() -> None:
        reset_script()
        litellm.completion(
            model=f"scripted/{SCRIPT}", messages=messages, tools=[schema], max_retries=0
        )

    return call


def _paired_ratio(mode: list[tuple[float, ...]], bare: list[tuple[float, ...]]) -> float:
    """The median, over rounds, of a mode's wall time over the bare loop's in the same round:
    a round's sessions run within a few ms of each other, so each ratio sees the same machine."""
    return statistics.median(m[0] / b[0] for m, b in zip(mode, bare, strict=True))


def _handover_share(k: int, team, schema: dict, rounds: int) -> str:
    """A diagnosis, not a goal: what the watched handover costs a task session. A task can be
    cancelled, so its loop runs on a pooled thread that the claiming thread watches
    (`openhive.engine.handover`: two wake-ups across threads, and the loop's working set on
    another core); a chat turn's runs on its caller's thread. Here the task mode runs in
    paired rounds with the bare loop, as it is and with its loop kept on the claiming thread,
    which no real task may do (a hung model call could then not be abandoned): the difference
    is the share of the task's ratio the handover holds."""
    from openhive.engine import handover

    watched = handover.run_watched

    def inline(loop, watch, *, poll, check):  # the handover's signature
        return loop()

    ratios: dict[str, list[float]] = {"watched": [], "inline": []}
    spent: dict[str, list[float]] = {"watched": [], "inline": []}
    try:
        for number in range(rounds):
            reset_script()
            bare_step = bare(k, schema)
            ways = ("watched", "inline") if number % 2 == 0 else ("inline", "watched")
            for way in ways:
                handover.run_watched = watched if way == "watched" else inline
                reset_script()
                step = task(k, team)[0]
                ratios[way].append(step / bare_step)
                spent[way].append(step * (k + 1))
    finally:
        handover.run_watched = watched
    cost = statistics.median(spent["watched"]) - statistics.median(spent["inline"])
    return (
        f"the loop's handover in a task: {cost * 1000:+.2f} ms a session; the task mode "
        f"{statistics.median(ratios['watched']):.2f}x the bare loop as it runs, "
        f"{statistics.median(ratios['inline']):.2f}x with its loop on the claiming thread "
        f"({rounds} paired rounds)"
    )


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _run(mode: str, k: int, team, schema: dict) -> tuple[float, float, float, int]:
    """One session: (wall, CPU of this process) per step, its time in database queries and
    its round trips."""
    reset_script()
    cpu = time.process_time()
    if mode == "bare":
        per_step, (in_queries, trips) = bare(k, schema), (0.0, 0)
    else:
        per_step, (in_queries, trips) = {"chat": chat, "task": task, "pull": pull}[mode](k, team)
    return per_step, (time.process_time() - cpu) / (k + 1), in_queries, trips


if __name__ == "__main__":
    main()

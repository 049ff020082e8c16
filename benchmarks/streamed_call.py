"""What streaming a reply costs: one zero-cost model call through the engine's model door
(`openhive.engine.llm.complete`) streamed, as a chat turn makes it, against the same call not
streamed, measured in the same run.

    uv run python benchmarks/streamed_call.py [--calls 300] [--rounds 4]

The scripted provider answers at once, so the figures are litellm's and the engine's own work.
Rounds of each way alternate; each figure is the median over rounds of a round's wall time per
call, with this process's CPU per call beside it (litellm's background threads included: its
stream handed every chunk to a logging job of its own, and a call's wall time paid for the GIL
those jobs took). No goal of its own: a chat turn's part of issue 19's chat figures.
"""

from __future__ import annotations

import argparse
import statistics
import time

from harness import throwaway_django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300, help="calls in a round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each way")
    args = parser.parse_args()

    with throwaway_django("openhive-stream-") as (data, _vendor):
        from openhive.engine import llm
        from openhive.engine.providers import ProviderProfile

        (data / "scripts" / "reply.yaml").write_text(
            "rules:\n  - when: {}\n    reply: {content: a short answer, "
            "usage: {prompt_tokens: 20, completion_tokens: 4}}\n"
        )
        profile = ProviderProfile(name="default", model="scripted/reply.yaml")
        messages = [
            {"role": "system", "content": "You route work. " * 100},
            {"role": "user", "content": "hello"},
        ]
        deltas: list[str] = []

        def streamed() -> llm.Completion:
            return llm.complete(profile, messages, [], team="main", on_delta=deltas.append)

        def plain() -> llm.Completion:
            return llm.complete(profile, messages, [], team="main")

        ways = {"streamed": streamed, "not streamed": plain}
        for call in ways.values():  # warm-up, and the two ways give the same reply
            replies = [call() for _ in range(20)]
        assert streamed().message == plain().message and replies[-1].completion_tokens == 4
        walls: dict[str, list[float]] = {name: [] for name in ways}
        cpus: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, call in ways.items():
                time.sleep(0.2)  # what a round left on litellm's threads is not the next's
                started, cpu = time.perf_counter(), time.process_time()
                for _ in range(args.calls):
                    call()
                walls[name].append((time.perf_counter() - started) / args.calls)
                cpus[name].append((time.process_time() - cpu) / args.calls)
        base = statistics.median(walls["not streamed"])
        for name in ways:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            print(
                f"{name:>12}: {wall * 1000:.2f} ms a call (CPU {cpu * 1000:.2f} ms), "
                f"{wall / base:.2f}x the call not streamed"
            )


if __name__ == "__main__":
    main()

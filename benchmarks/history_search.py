"""search_history at size: the calling team has N finished sessions and N/10 chat topics (10
messages each), among 4 other teams of the same size.

    uv run python benchmarks/history_search.py                  # SQLite, N=2000
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> uv run python benchmarks/history_search.py

Prints p50/p95 of the whole tool call (`call_tool`, as a session calls it) over random 2-word
queries from a Zipf vocabulary, and, as the baseline in the same run, the database narrowing
alone (the two candidate queries, no ranking, no snippets). Goal: p95 under 250 ms at N=2000.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import throwaway_django

OTHER_TEAMS = 4
QUERIES = 60
GOAL_P95_MS = 250.0


def vocabulary(rng, size: int = 3000) -> tuple[list[str], list[float]]:
    words = [f"w{i}" for i in range(size)]
    weights = [1.0 / (rank + 1) for rank in range(size)]
    return words, weights


def text(rng, words, weights, n: int) -> str:
    return " ".join(rng.choices(words, weights, k=n))


def load(n: int) -> object:
    import random

    from django.utils import timezone

    from openhive.chat.models import Message, Topic
    from openhive.engine.models import Session
    from tasks.models import Task
    from teams.models import Team

    rng = random.Random(7)
    words, weights = vocabulary(rng)
    main = Team.objects.get_or_create(name="main")[0]
    teams = [Team.objects.create(name=f"t{i}", parent=main) for i in range(OTHER_TEAMS + 1)]
    now = timezone.now()
    for team in teams:
        tasks = Task.objects.bulk_create(
            [Task(team=team, text=text(rng, words, weights, 20), status="done") for _ in range(n)]
        )
        Session.objects.bulk_create(
            [
                Session(
                    team=team, task=task, final_text=text(rng, words, weights, 120), finished_at=now
                )
                for task in tasks
            ]
        )
        topics = Topic.objects.bulk_create(
            [Topic(channel_id="web:bench", name=f"topic {i}") for i in range(n // 10)]
        )
        Session.objects.bulk_create(
            [Session(team=team, topic=t, kind="chat", finished_at=now) for t in topics]
        )
        Message.objects.bulk_create(
            [
                Message(
                    topic=t,
                    channel_id="web:bench",
                    role="user",
                    content=text(rng, words, weights, 30),
                )
                for t in topics
                for _ in range(10)
            ]
        )
    return teams[0], rng, words


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=2000)
    args = parser.parse_args()
    with throwaway_django("openhive-history-") as (_, vendor):
        from memory.history import history_terms, session_history_docs
        from openhive.chat.selectors import topic_history_docs
        from openhive.core.context import ToolContext
        from openhive.engine.tool_calls import call_tool

        team, rng, words = load(args.size)
        # Mid-frequency words: common enough to match, rare enough to mean something.
        queries = [
            f"{rng.choice(words[20:400])} {rng.choice(words[20:400])}" for _ in range(QUERIES)
        ]
        ctx = ToolContext(team=team, actor=team.name)
        tool_ms, narrow_ms, found = [], [], 0
        for query in queries:
            start = time.perf_counter()
            terms = history_terms(query)
            session_history_docs(team_id=team.pk, terms=terms)
            topic_history_docs(team_id=team.pk, terms=terms)
            narrow_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            result = call_tool(ctx, "search_history", {"query": query, "limit": 5})
            tool_ms.append((time.perf_counter() - start) * 1000)
            assert result["success"], result
            found += len(result["results"])
        p50, p95 = statistics.median(tool_ms), percentile(tool_ms, 95)
        print(f"database: {vendor}; team sessions: {args.size}, topics: {args.size // 10}")
        print(f"search_history p50 {p50:.1f} ms, p95 {p95:.1f} ms (goal p95 < {GOAL_P95_MS} ms)")
        print(
            f"baseline, narrowing queries only: p50 {statistics.median(narrow_ms):.1f} ms, "
            f"p95 {percentile(narrow_ms, 95):.1f} ms"
        )
        print(f"results per query: {found / QUERIES:.1f}; goal met: {p95 < GOAL_P95_MS}")


if __name__ == "__main__":
    main()

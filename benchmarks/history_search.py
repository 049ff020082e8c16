"""search_history at size: the calling team has N finished sessions and N/10 chat topics (10
messages each), among 4 other teams of the same size.

    uv run python benchmarks/history_search.py                  # SQLite, N=2000
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> uv run python benchmarks/history_search.py

Prints p50/p95 of the whole tool call (`call_tool`, as a session calls it) over random 2-word
queries from a Zipf vocabulary, and, as the baseline in the same run, the database narrowing
alone (the two candidate queries, no ranking, no snippets). Goal: p95 under 250 ms at N=2000.

The tool is measured twice: words only (embeddings disabled in providers.yaml) and hybrid (the
offline MiniLM model; the team's recent documents embedded first, a one-off cost printed per
document, as a warm team has them). `--words-only` skips the hybrid part.
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
    parser.add_argument("--words-only", action="store_true")
    args = parser.parse_args()
    with throwaway_django("openhive-history-") as (data, vendor):
        from memory.history import history_terms, session_history_docs
        from memory.history_vectors import VECTOR_POOL, history_vectors_fill
        from openhive.chat.selectors import topic_history_docs
        from openhive.core.context import ToolContext
        from openhive.engine.tool_calls import call_tool

        team, rng, words = load(args.size)
        # Mid-frequency words: common enough to match, rare enough to mean something.
        queries = [
            f"{rng.choice(words[20:400])} {rng.choice(words[20:400])}" for _ in range(QUERIES)
        ]
        ctx = ToolContext(team=team, actor=team.name)
        providers = data / "config" / "providers.yaml"

        def measure(mode: str) -> tuple[list[float], int]:
            tool_ms, found = [], 0
            for query in queries:
                start = time.perf_counter()
                result = call_tool(ctx, "search_history", {"query": query, "limit": 5})
                tool_ms.append((time.perf_counter() - start) * 1000)
                assert result["success"] and result["search_mode"] == mode, result
                found += len(result["results"])
            return tool_ms, found

        narrow_ms = []
        for query in queries:
            start = time.perf_counter()
            terms = history_terms(query)
            session_history_docs(team_id=team.pk, terms=terms)
            topic_history_docs(team_id=team.pk, terms=terms)
            narrow_ms.append((time.perf_counter() - start) * 1000)
        providers.write_text("profiles: {}\nembedding: {model: none}\n")
        words_ms, found = measure("full_text_only")
        p50, p95 = statistics.median(words_ms), percentile(words_ms, 95)
        print(f"database: {vendor}; team sessions: {args.size}, topics: {args.size // 10}")
        print(f"search_history words only: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
        print(
            f"baseline, narrowing queries only: p50 {statistics.median(narrow_ms):.1f} ms, "
            f"p95 {percentile(narrow_ms, 95):.1f} ms"
        )
        print(f"results per query: {found / QUERIES:.1f}; goal met: {p95 < GOAL_P95_MS}")
        if args.words_only:
            return
        providers.unlink()  # the default: the offline MiniLM model
        recent = session_history_docs(
            team_id=team.pk, terms=None, limit=VECTOR_POOL
        ) + topic_history_docs(team_id=team.pk, terms=None, limit=VECTOR_POOL)
        start = time.perf_counter()
        filled = history_vectors_fill(team_id=team.pk, docs=recent)
        fill_ms = (time.perf_counter() - start) * 1000
        print(f"warm-up: {filled} documents embedded, {fill_ms / max(filled, 1):.1f} ms each")
        hybrid_ms, found = measure("hybrid")
        h50, h95 = statistics.median(hybrid_ms), percentile(hybrid_ms, 95)
        print(
            f"search_history hybrid: p50 {h50:.1f} ms, p95 {h95:.1f} ms "
            f"(goal p95 < {GOAL_P95_MS} ms); ratio to words only: p50 x{h50 / p50:.2f}, "
            f"p95 x{h95 / p95:.2f}; results per query: {found / QUERIES:.1f}; "
            f"goal met: {h95 < GOAL_P95_MS}"
        )


if __name__ == "__main__":
    main()

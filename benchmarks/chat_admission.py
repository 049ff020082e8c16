"""What storing an inbound chat message costs before its ack, against one bare INSERT of the
same row measured in the same run.

    uv run python benchmarks/chat_admission.py [--rounds 400]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x uv run python benchmarks/chat_admission.py

The admit thread runs the trust gate and writes the message with its audit row
(`openhive.chat.admit`), under the same trust policy as benchmarks/chat_sockets.py. Two
figures (BENCH_PROFILE=<file> writes a cProfile of the batches):
  - a lone message, handed to the admit thread as the socket does: its latency (p50, p90);
  - a batch of 200 (a burst): wall and CPU time per message.
The baseline is one INSERT of one message row on the same connection, in autocommit: the least
any admission can cost. On PostgreSQL a batch is one query (one round trip), so the ratio to
the baseline shows what is left besides the database's own work. A third line times a
socket's read on a chat database thread (its topic list, `dbpool.db`) against the same read
called directly, and the reads of every turn, topic change or connect (a waiting question, the
topic list, the outbox) compiled once against the ORM compiling them at each read. No goal of
its own: the ack goals are benchmarks/chat_sockets.py's; this one tells where an ack's time
goes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import statistics
import time

from harness import throwaway_django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args()

    with throwaway_django("openhive-admission-") as (data, vendor):
        from django.db import connection

        from openhive.chat import selectors
        from openhive.chat.admit import Admission, chat_receive_many
        from openhive.chat.dbpool import close_db_connections, db, on_admit_thread
        from openhive.chat.models import Message, Topic
        from openhive.core.prepared import USES_BEFORE_PREPARE
        from openhive.core.rows import insert_statement
        from tasks.models import UserQuestion
        from tasks.services.waiting import _PENDING_IN_TOPIC, _pending_in_topic
        from trust.gate import Sender

        # The gate runs its full order, as in benchmarks/chat_sockets.py: no denylist hit, no
        # stored grant (one read for the batch), no allowlist hit, the channel's policy.
        config = data / "config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "channels.yaml").write_text(
            "trust:\n  default_policy: deny\n  channels:\n    ws: {policy: allow}\n"
        )
        lone = [Admission(Sender("ws:user:1", "alice"), "hello")]
        burst = [Admission(Sender(f"ws:user:{n}", f"user{n}"), f"hello {n}") for n in range(200)]
        on_thread = on_admit_thread(chat_receive_many)

        row = {"channel_id": "ws:user:1", "sender_id": "alice", "role": Message.Role.USER,
               "content": "hello", "trust_decision": "allow"}  # fmt: skip
        # Built once, the database's part only: as often as makes it a prepared statement
        # on PostgreSQL (openhive.core.prepared), as the admissions' own INSERT is.
        for _ in range(USES_BEFORE_PREPARE):
            statement = insert_statement(Message, [row])

        def bare_insert() -> None:
            with connection.cursor() as cursor:
                cursor.execute(*statement)

        def timed(call, rounds: int) -> list[float]:
            for _ in range(min(50, rounds)):
                call()
            out = []
            for _ in range(rounds):
                started = time.perf_counter()
                call()
                out.append(time.perf_counter() - started)
            return sorted(out)

        try:
            base = timed(bare_insert, args.rounds)
            alone = asyncio.run(_lone(on_thread, lone, args.rounds))
            read_direct = timed(lambda: selectors.topics_for_channel(channel_id="ws:user:1"),
                                args.rounds)  # fmt: skip
            read_pooled = asyncio.run(
                _lone(lambda _: db(selectors.topics_for_channel)(channel_id="ws:user:1"), [],
                      args.rounds)
            )  # fmt: skip
            # What a turn reads before it starts (is a question waiting in the topic?) and a
            # socket at every change of its topics, compiled once against the ORM's queryset
            # compiled at each read (how both were read before).
            topic = Topic.objects.create(channel_id="ws:user:1", name="bench")
            reads = {
                "waiting question": (
                    lambda: _PENDING_IN_TOPIC.rows(UserQuestion, channel_id="ws:user:1",
                                                   topic_id=topic.pk),
                    lambda: list(_pending_in_topic("ws:user:1", topic.pk)),
                ),
                "topic list": (
                    lambda: selectors.topics_for_channel(channel_id="ws:user:1"),
                    lambda: list(selectors._open_topics("ws:user:1")),
                ),
                "outbox at connect (empty)": (
                    lambda: selectors.outbox_undelivered(channel_id="ws:user:1"),
                    lambda: list(selectors._undelivered("ws:user:1")
                                 .select_related("topic", "message")[:100]),
                ),
            }  # fmt: skip
            compiled_reads = {}
            for name, (compiled, orm) in reads.items():
                compiled_reads[name] = (timed(compiled, args.rounds), timed(orm, args.rounds))
            batches = max(10, args.rounds // 20)
            for _ in range(5):
                chat_receive_many(burst)
            profile = cProfile.Profile() if os.environ.get("BENCH_PROFILE") else None
            cpu, wall = time.process_time(), time.perf_counter()
            if profile:
                profile.enable()
            for _ in range(batches):
                chat_receive_many(burst)
            if profile:
                profile.disable()
                profile.dump_stats(os.environ["BENCH_PROFILE"])
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        finally:
            close_db_connections()

        def p(values: list[float], q: float) -> float:
            return values[min(len(values) - 1, int(q * len(values)))] * 1000

        floor = statistics.median(base) * 1000
        print(f"database: {vendor}; {args.rounds} rounds; baseline = one bare INSERT of one row")
        print(f"baseline: p50 {floor:.3f} ms")
        print(
            f"lone message through the admit thread: p50 {p(alone, 0.5):.3f} ms, "
            f"p90 {p(alone, 0.9):.3f} ms ({p(alone, 0.5) / floor:.1f}x the bare INSERT)"
        )
        print(
            f"topic list on a chat database thread: p50 {p(read_pooled, 0.5):.3f} ms; called "
            f"directly: p50 {p(read_direct, 0.5):.3f} ms"
        )
        for name, (compiled, orm) in compiled_reads.items():
            print(
                f"{name}, compiled once: p50 {p(compiled, 0.5):.3f} ms; the ORM's queryset: "
                f"p50 {p(orm, 0.5):.3f} ms ({p(orm, 0.5) / p(compiled, 0.5):.1f}x)"
            )
        per = wall / (batches * len(burst)) * 1000
        print(
            f"batch of {len(burst)}: {per:.4f} ms a message wall, "
            f"{cpu / (batches * len(burst)) * 1000:.4f} ms CPU "
            f"(one bare INSERT a message would be {floor / per:.0f}x that)"
        )


async def _lone(on_thread, lone: list, rounds: int) -> list[float]:
    """As a socket awaits its admission (or a read): from a running event loop."""
    for _ in range(min(50, rounds)):
        await on_thread(lone)
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        await on_thread(lone)
        out.append(time.perf_counter() - started)
    return sorted(out)


if __name__ == "__main__":
    main()

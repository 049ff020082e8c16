"""The engine's record tables keep only the indexes some query reads (every step writes to
each of them), and migration 0008, which dropped the others, goes forward and back on both
databases keeping every row."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from openhive.engine.models import LlmExchange, Session, ToolCall

BEFORE = ("engine", "0007_worker_beat")
AFTER = ("engine", "0008_drop_unused_indexes")
DROPPED = {
    "engine_llmexchange_session_id_168770a0",
    "engine_session_agent_name_e84ef46c",
    "engine_toolcall_tool_a2970285",
}
PATTERN = {"engine_session_agent_name_e84ef46c_like", "engine_toolcall_tool_a2970285_like"}


def index_names() -> set[str]:
    names: set[str] = set()
    with connection.cursor() as cursor:
        for table in ("engine_llmexchange", "engine_session", "engine_toolcall"):
            names |= set(connection.introspection.get_constraints(cursor, table))
    return names


def migrate_to(target: tuple[str, str]) -> None:
    MigrationExecutor(connection).migrate([target])


@pytest.mark.django_db
def test_each_step_writes_no_index_that_no_query_reads():
    names = index_names()
    assert not names & (DROPPED | PATTERN)
    # What the lookups use instead: the (session, turn) key and a plain index of the tool.
    assert {"uniq_exchange_turn", "toolcall_tool_idx"} <= names


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="query plans of PostgreSQL")
def test_a_sessions_exchanges_are_found_through_the_turn_key():
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT * FROM engine_llmexchange WHERE session_id = 7 ORDER BY turn"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "uniq_exchange_turn" in plan


@pytest.mark.django_db(transaction=True)
def test_the_index_drop_migrates_back_and_forth_keeping_every_row(main_team):
    session = Session.objects.create(team=main_team, kind=Session.Kind.CHAT, agent_name="a")
    LlmExchange.objects.create(session=session, turn=1, request_digest="d")
    ToolCall.objects.create(session=session, team=main_team, team_name="main", tool="add")
    try:
        migrate_to(BEFORE)
        restored = index_names()
        assert restored >= DROPPED
        assert (restored >= PATTERN) == (connection.vendor == "postgresql")
        migrate_to(AFTER)
    finally:
        migrate_to(AFTER)  # whatever happened, leave the schema as the other tests expect it
    assert not index_names() & (DROPPED | PATTERN)
    counts = [model.objects.count() for model in (Session, LlmExchange, ToolCall)]
    assert counts == [1, 1, 1]

"""A team session's start: its row, the scrubber's secrets and everything its prompt reads (the
team's ancestors, its inbox, its memory) go to the database in one query on PostgreSQL, and
the session sees what they hold, as when each was read on its own."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.services import memory_save
from openhive.core import paths, scrubbing
from openhive.core.reads import Read, run_reads
from openhive.core.rows import insert_instances
from openhive.engine.models import LlmExchange, Session
from teams.agent import agent_spec_for, run_team_session
from teams.config import default_config, write_team_config
from teams.models import Team, TeamMessage
from teams.services import teammessage_send
from tests.factories import TeamFactory
from tests.queries import as_written
from vault import crypto
from vault.models import VaultEntry

pytestmark = pytest.mark.django_db

SECRET = "stored-elsewhere-Zq81xk2"
START_TABLES = ('"engine_session"', '"vault_vaultentry"', '"teams_teammessage"',
                "WITH RECURSIVE", '"memory_memory"')  # fmt: skip


@pytest.fixture
def ops(main_team, vault_key, monkeypatch):
    """A child of main with org rules up its tree, a memory entry, a message waiting for it,
    and a secret another process stored (this process's scrubber was not told)."""
    monkeypatch.setattr(scrubbing, "CACHE_SECONDS", 60.0)
    scrubbing.get_scrubber(refresh=True)
    team = TeamFactory(name="ops", parent=main_team)
    write_team_config(default_config("ops", parent="main"))
    rules = paths.team_dir("main") / "org-rules"
    rules.mkdir(parents=True, exist_ok=True)
    (rules / "r.md").write_text("MAIN ORG RULE")
    memory_save(team=team, key="pager", content="Page the on-call lead first.", type="lesson")
    teammessage_send(sender=main_team, recipient=team, content="Please check the backups.")
    VaultEntry.objects.create(team=team, key="TOKEN", value=crypto.encrypt(SECRET), is_secret=True)
    return team


def _start_queries(queries: list[dict]) -> list[str]:
    return [q["sql"] for q in queries if any(t in q["sql"] for t in START_TABLES)]


def test_a_session_sees_its_ancestors_rules_memory_and_inbox_and_scrubs_a_new_secret(
    ops, scripted_provider
):
    scripted_provider([{"when": {}, "reply": {"content": f"Token is {SECRET}."}}])
    outcome = run_team_session(ops, "status?")
    assert outcome.ok
    system = " ".join(
        m["content"]
        for m in LlmExchange.objects.get(session_id=outcome.session_id).request_messages
        if m["role"] == "system"
    )
    assert "MAIN ORG RULE" in system
    assert "Page the on-call lead first." in system
    assert "Please check the backups." in system
    # The secret stored without telling this process is known from the session's start.
    assert SECRET not in outcome.content and "[REDACTED]" in outcome.content
    assert SECRET not in Session.objects.get(pk=outcome.session_id).final_text
    # The message was taken: the next session is not shown it again.
    assert TeamMessage.objects.get(recipient=ops).delivered_at is not None
    again = run_team_session(ops, "again?")
    system = LlmExchange.objects.get(session_id=again.session_id).request_messages[1]["content"]
    assert "Please check the backups." not in system


def test_the_start_sends_its_row_and_reads_in_one_query_on_postgresql(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    with CaptureQueriesContext(connection) as captured:
        assert run_team_session(ops, "status?").ok
    start = _start_queries(as_written(captured.captured_queries))
    if connection.vendor == "postgresql":
        # The row, the secrets, the ancestors, the inbox and the memory: one round trip where
        # they took five. Then only the message's delivery and the session's end.
        assert all(table in start[0] for table in START_TABLES)
        assert 'INSERT INTO "engine_session"' in start[0]
        reads = ('"vault_vaultentry"', "WITH RECURSIVE", '"memory_memory"', 'SELECT "teams_')
        assert not any(read in q for q in start[1:] for read in reads)
    else:  # one statement a query: each read on its own, each once
        for table in START_TABLES:
            assert sum(table in q for q in start) >= 1
        assert sum('"memory_memory"' in q for q in start) == 1


def test_a_subagent_session_leaves_the_inbox_to_the_orchestrator(ops, scripted_provider):
    helper = paths.team_dir("ops") / "subagents" / "helper.md"
    helper.parent.mkdir(parents=True, exist_ok=True)
    helper.write_text("---\nname: helper\ndescription: Helps.\n---\nYou help.\n")
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    with CaptureQueriesContext(connection) as captured:
        assert run_team_session(ops, "help", subagent="helper").ok
    assert not any('"teams_teammessage"' in q["sql"] for q in as_written(captured.captured_queries))
    assert TeamMessage.objects.get(recipient=ops).delivered_at is None


def test_a_spec_built_without_a_start_reads_for_itself(ops, scripted_provider):
    """Callers that build a spec on their own (a replay, the CLI) get the same prompt."""
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    spec = agent_spec_for(Team.objects.get(pk=ops.pk))
    system = " ".join(m["content"] for m in spec.system_messages)
    assert "MAIN ORG RULE" in system and "Page the on-call lead first." in system
    assert "Please check the backups." in system


def test_reads_answer_in_order_in_one_query_where_the_database_allows(main_team):
    child = TeamFactory(name="child", parent=main_team)
    reads = [
        Read("SELECT name FROM teams_team WHERE id = %s", [child.pk], lambda c, rows: rows),
        Read.of(Team, "SELECT * FROM teams_team WHERE id = %s", [main_team.pk]),
        Read("SELECT id FROM teams_team WHERE id < 0", [], lambda c, rows: ("none", rows)),
    ]
    with CaptureQueriesContext(connection) as captured:
        names, teams, nothing = run_reads(reads)
    assert names == [("child",)]
    assert [t.name for t in teams] == ["main"] and isinstance(teams[0], Team)
    assert nothing == ("none", [])
    one_query = connection.vendor == "postgresql"
    assert len(as_written(captured.captured_queries)) == (1 if one_query else 3)


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_an_insert_returns_the_answers_of_the_reads_sent_after_it(main_team):
    team = Team(name="fresh", parent=main_team)
    count = "SELECT count(*) FROM teams_team"
    answers = insert_instances(
        [team],
        after=("SELECT 1", []),
        then=[Read(count, [], lambda c, rows: rows[0][0]), Read.of(Team, *_named("fresh"))],
    )
    assert team.pk is not None and not team._state.adding
    assert answers[0] == Team.objects.count()  # the reads see the row just written
    assert [t.pk for t in answers[1]] == [team.pk]


def _named(name: str) -> tuple[str, list]:
    return "SELECT * FROM teams_team WHERE name = %s", [name]

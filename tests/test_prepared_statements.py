"""PostgreSQL's prepared statements for the statements every claim, session start and step
runs: used once a connection has run a statement a few times, with the same answers, and
recovered from when the server loses them or a migration makes them stale."""

from __future__ import annotations

import logging

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from openhive.core import prepared as prepared_module
from openhive.core.prepared import USES_BEFORE_PREPARE, prepared, unprepared
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue

on_postgresql = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="prepared statements are PostgreSQL's"
)


def _answer(sql: str, params: list) -> list:
    with connection.cursor() as cursor:
        cursor.execute(prepared(sql), params)
        return cursor.fetchall()


def _server_has(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE name = %s", [name])
        return cursor.fetchone()[0] == 1


@pytest.fixture
def table(transactional_db):
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE prep_probe (a int, note text)")
        cursor.execute("INSERT INTO prep_probe VALUES (1, '100% sure'), (2, 'two')")
    yield "prep_probe"
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS prep_probe")


@on_postgresql
def test_a_statement_run_a_few_times_is_prepared_and_answers_the_same(table):
    sql = "SELECT a, note FROM prep_probe WHERE a >= %s AND note LIKE '%%' ORDER BY a"
    sent = [prepared(sql) for _ in range(USES_BEFORE_PREPARE - 1)]
    assert sent == [sql] * (USES_BEFORE_PREPARE - 1)
    answers = [_answer(sql, [1]) for _ in range(3)]
    assert answers == [[(1, "100% sure"), (2, "two")]] * 3
    text = prepared(sql)
    assert text.startswith("EXECUTE oh_") and text.endswith("(%s)")
    assert _server_has(text.split()[1].split("(")[0])
    assert unprepared(f"BEGIN; {text}; COMMIT") == f"BEGIN; {sql}; COMMIT"


@on_postgresql
def test_a_statement_the_server_lost_runs_again_unprepared_and_is_prepared_anew(table):
    sql = "SELECT note FROM prep_probe WHERE a = %s"
    for _ in range(USES_BEFORE_PREPARE):
        _answer(sql, [2])
    name = prepared(sql).split("(")[0].split()[1]
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # what a pooler's reset (DISCARD ALL) does
    assert _answer(sql, [2]) == [("two",)]  # the EXECUTE failed; the plain query answered
    assert not _server_has(name)
    for _ in range(USES_BEFORE_PREPARE):
        assert _answer(sql, [1]) == [("100% sure",)]
    assert _server_has(name)


@on_postgresql
def test_a_statement_a_migration_made_stale_still_answers_with_the_new_shape(table, caplog):
    sql = "SELECT * FROM prep_probe WHERE a = %s"
    for _ in range(USES_BEFORE_PREPARE + 1):
        assert _answer(sql, [1]) == [(1, "100% sure")]
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE prep_probe ADD COLUMN extra int DEFAULT 7")
    caplog.set_level(logging.INFO, logger="openhive.core.prepared")
    assert _answer(sql, [1]) == [(1, "100% sure", 7)]
    assert any("was stale" in r.getMessage() for r in caplog.records)
    for _ in range(USES_BEFORE_PREPARE + 1):
        assert _answer(sql, [2]) == [(2, "two", 7)]
    assert prepared(sql).startswith("EXECUTE oh_")


@on_postgresql
def test_a_lost_statement_inside_a_transaction_fails_it_and_the_next_run_recovers(table):
    sql = "SELECT a FROM prep_probe WHERE note = %s"
    for _ in range(USES_BEFORE_PREPARE):
        _answer(sql, ["two"])
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    with pytest.raises(Exception, match="does not exist"), transaction.atomic():
        _answer(sql, ["two"])
    assert _answer(sql, ["two"]) == [(2,)]


@on_postgresql
def test_a_query_that_committed_part_of_its_work_is_not_run_again(table):
    sql = "SELECT count(*) FROM prep_probe WHERE a = %s"
    for _ in range(USES_BEFORE_PREPARE):
        _answer(sql, [9])
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
        with pytest.raises(Exception, match="does not exist"):
            cursor.execute(
                f"BEGIN; INSERT INTO prep_probe VALUES (9, 'once'); COMMIT; {prepared(sql)}", [9]
            )
    assert _answer(sql, [9]) == [(1,)]


@on_postgresql
def test_nothing_is_prepared_inside_a_transaction(table):
    sql = "SELECT count(*) FROM prep_probe WHERE a <> %s"
    with transaction.atomic(), CaptureQueriesContext(connection) as seen:
        for _ in range(USES_BEFORE_PREPARE + 2):
            assert _answer(sql, [0]) == [(2,)]
    assert not any("PREPARE" in q["sql"] for q in seen.captured_queries)
    assert prepared(sql).startswith("EXECUTE oh_")  # outside it, now


@on_postgresql
def test_a_statement_postgresql_cannot_type_runs_unprepared_and_is_logged_once(table, caplog):
    sql = "SELECT %s IS NULL FROM prep_probe WHERE a = 1"
    caplog.set_level(logging.WARNING, logger="openhive.core.prepared")
    for _ in range(USES_BEFORE_PREPARE + 3):
        assert _answer(sql, [None]) == [(True,)]
    refused = [r for r in caplog.records if "would not prepare" in r.getMessage()]
    assert len(refused) == 1
    assert "could not determine data type" in refused[0].getMessage()


@on_postgresql
def test_the_switch_turns_them_off(table, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "PG_PREPARED": False}
    sql = "SELECT a FROM prep_probe WHERE a = %s AND a > 0"
    assert [prepared(sql) for _ in range(USES_BEFORE_PREPARE + 2)] == [sql] * 5


@on_postgresql
def test_tasks_claim_start_and_record_through_prepared_statements(
    transactional_db, main_team, scripted_provider
):
    """Through the queue: after a few tasks the enqueue, the claim, the session's start and
    its step all run as EXECUTE, and every task still ends done with its session recorded."""
    scripted_provider([{"when": {}, "reply": {"content": "done"}}])
    with CaptureQueriesContext(connection) as seen:
        for number in range(USES_BEFORE_PREPARE + 2):
            task = task_enqueue(team=main_team, text=f"job {number}")
            assert run_task(task.pk) == "done"
    last = [q["sql"] for q in seen.captured_queries[-7:]]
    executes = [sql for sql in last if "EXECUTE oh_" in sql]
    assert len(executes) >= 4, last
    assert set(Task.objects.values_list("status", flat=True)) == {Task.Status.DONE}
    assert all(t.sessions.count() == 1 for t in Task.objects.all())


@on_postgresql
def test_a_named_claim_whose_statements_a_pooler_reset_took_still_runs_its_task(
    transactional_db, main_team, scripted_provider
):
    """The claim's BEGIN travels with its first EXECUTE, so a lost statement fails the
    claim's transaction: it is rolled back and the claim made again."""
    scripted_provider([{"when": {}, "reply": {"content": "done"}}])
    for number in range(USES_BEFORE_PREPARE + 1):
        assert run_task(task_enqueue(team=main_team, text=f"job {number}").pk) == "done"
    task = task_enqueue(team=main_team, text="after the reset")
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    with CaptureQueriesContext(connection) as seen:
        assert run_task(task.pk) == "done"
    assert "ROLLBACK" in [q["sql"] for q in seen.captured_queries]
    assert Task.objects.get(pk=task.pk).attempts == 1


@pytest.mark.skipif("connection.vendor == 'postgresql'", reason="SQLite's case")
def test_sqlite_gets_every_statement_as_written(transactional_db):
    sql = "SELECT 1 WHERE 1 = %s"
    assert {prepared(sql) for _ in range(USES_BEFORE_PREPARE + 2)} == {sql}


def test_placeholders_become_numbered_parameters_and_named_ones_are_left_alone():
    statement = prepared_module._statement("SELECT %s, '100%%' WHERE a = %s")
    assert statement is not None
    assert statement.body == "SELECT $1, '100%' WHERE a = $2"
    assert statement.execute == f"EXECUTE {statement.name}(%s, %s)"
    assert prepared_module._statement("SELECT %(a)s") is None
    assert prepared_module._statement("SELECT now()").execute.endswith(
        prepared_module._statement("SELECT now()").name
    )

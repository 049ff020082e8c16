"""A task's end written by its session, in the transaction of the session's own end: one commit
where there were two. An end that does more than change the task's row is still recorded after
the session, and anything that stops the joint write leaves both ends recorded apart."""

from __future__ import annotations

import logging
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from openhive.chat.models import OutboxMessage
from openhive.engine.models import LlmExchange, Session
from tasks.finisher import Finisher
from tasks.models import Task
from tasks.runner import run_claimed, run_task
from tasks.services import session_ends, task_enqueue
from tasks.services.claims import batch_owner, task_claim_batch
from tests.queries import as_written

pytestmark = pytest.mark.django_db(transaction=True)  # commits are what is checked

TASK_END = 'UPDATE "tasks_task" SET "status" = '


def transactions(sqls: list[str]) -> list[list[str]]:
    """The statements grouped by transaction: BEGIN opens one, COMMIT closes it; any other
    query is one of its own (autocommit, or PostgreSQL's query of several statements)."""
    groups: list[list[str]] = []
    current: list[str] | None = None
    for sql in sqls:
        if sql.startswith("BEGIN"):
            current = [sql]
        elif current is not None:
            current.append(sql)
        else:
            groups.append([sql])
        if current is not None and sql.rstrip().endswith("COMMIT"):
            groups.append(current)
            current = None
    return groups


def run(task: Task) -> tuple[str, list[list[str]]]:
    with CaptureQueriesContext(connection) as captured:
        status = run_task(task.pk)
    return status, transactions([q["sql"] for q in as_written(captured.captured_queries)])


def session_end(sql: str) -> bool:
    return 'UPDATE "engine_session"' in sql and '"stop_reason" = ' in sql


def ending(groups: list[list[str]]) -> list[list[str]]:
    return [g for g in groups if any(TASK_END in sql for sql in g)]


def test_a_tasks_end_commits_with_its_sessions_end(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "All checked."}}])
    task = task_enqueue(team=main_team, text="check")
    status, groups = run(task)
    assert status == Task.Status.DONE
    [together] = ending(groups)
    assert any(session_end(sql) for sql in together)
    task.refresh_from_db()
    assert (task.status, task.result, task.lease_owner) == ("done", "All checked.", "")
    session = Session.objects.get(task=task)
    assert (session.stop_reason, session.final_text) == ("completed", "All checked.")


def test_a_task_that_tells_its_chat_is_ended_after_its_session(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "Disk at 40%."}}])
    task = task_enqueue(team=main_team, text="disk?", source_channel="web:alice")
    status, groups = run(task)
    assert status == Task.Status.DONE
    [alone] = ending(groups)
    assert not any(session_end(sql) for sql in alone)
    assert OutboxMessage.objects.get().content == "[main] Disk at 40%."


def test_a_task_reaped_before_its_session_ends_keeps_its_new_holder(
    main_team, scripted_provider, monkeypatch
):
    scripted_provider([{"when": {}, "reply": {"content": "late"}}])
    task = task_enqueue(team=main_team, text="go")
    offer = session_ends.EndWithSession.__call__

    def reaped_first(self, outcome):
        Task.objects.filter(pk=task.pk).update(lease_owner="another-worker")
        return offer(self, outcome)

    monkeypatch.setattr(session_ends.EndWithSession, "__call__", reaped_first)
    assert run_task(task.pk) == Task.Status.RUNNING
    task.refresh_from_db()
    assert (task.status, task.lease_owner, task.result) == ("running", "another-worker", "")
    assert Session.objects.get(task=task).stop_reason == "completed"


def test_an_end_that_cannot_be_prepared_is_recorded_after_the_session(
    main_team, scripted_provider, monkeypatch, caplog
):
    scripted_provider([{"when": {}, "reply": {"content": "fine"}}])
    task = task_enqueue(team=main_team, text="go")

    def broken(*args, **kwargs):
        raise RuntimeError("no fields today")

    monkeypatch.setattr(session_ends, "held_end_fields", broken)
    with caplog.at_level(logging.ERROR, logger="openhive.engine.recorder"):
        assert run_task(task.pk) == Task.Status.DONE
    assert "the caller's end was not prepared" in caplog.text
    task.refresh_from_db()
    assert (task.status, task.result) == ("done", "fine")
    assert Session.objects.get(task=task).stop_reason == "completed"


def test_an_end_the_database_refuses_leaves_both_ends_written_apart(
    main_team, scripted_provider, monkeypatch
):
    scripted_provider([{"when": {}, "reply": {"content": "fine"}}])
    task = task_enqueue(team=main_team, text="go")
    refused = ('UPDATE "tasks_task" SET "text" = NULL WHERE id = %s', [task.pk])  # NOT NULL
    monkeypatch.setattr(session_ends, "end_held_statement", lambda *a, **k: refused)
    assert run_task(task.pk) == Task.Status.DONE
    task.refresh_from_db()
    assert (task.status, task.result) == ("done", "fine")
    session = Session.objects.get(task=task)
    assert (session.stop_reason, session.final_text) == ("completed", "fine")
    assert LlmExchange.objects.filter(session=session).count() == 1


@pytest.mark.parametrize("channel", ["", "web:alice"])
def test_in_a_pull_worker_only_an_end_that_tells_someone_waits_for_the_finisher(
    main_team, scripted_provider, channel
):
    """Its group commit of ends is for ends that write more than the task's row; the others
    are already written with their sessions."""
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    task_enqueue(team=main_team, text="go", source_channel=channel)
    owner = batch_owner()
    [held] = task_claim_batch(worker=owner, limit=1)
    finisher = Finisher(group=True)
    finisher.start()
    outcome: list[str] = []

    def runner() -> None:  # a pull worker's runner thread, bound to its finisher
        finisher.bind()
        try:
            outcome.append(run_claimed(held, owner))
        finally:
            connection.close()

    thread = threading.Thread(target=runner)
    thread.start()
    thread.join(timeout=60)
    finisher.stop()
    assert outcome == [Task.Status.DONE]
    assert finisher.batches == (1 if channel else 0)
    held.refresh_from_db()
    assert (held.status, held.result, held.lease_owner) == ("done", "ok", "")

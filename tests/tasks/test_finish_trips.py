"""A held task's end outside the finisher: one statement in autocommit when nothing else is
written with it, the one transaction of before when something is (a chat notice, a budget
escalation, a `task_finished` receiver that may act on it). Either way it is lease-checked,
committed before the caller hears of it, and signalled."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from openhive.core.db import NO_FLUSH_WAIT
from tasks.models import Task
from tasks.services import ends as task_ends
from tasks.services import task_cancel, task_enqueue, task_finish
from tasks.services.claims import task_claim_batch
from tasks.signals import end_observed, finished_receiver, task_finished
from tests.queries import as_written
from tests.tasks.committed import committed_status

pytestmark = pytest.mark.django_db(transaction=True)  # commits are what is checked


def claim(team, **fields) -> Task:
    task_enqueue(team=team, text="work", **fields)
    [held] = task_claim_batch(worker="w1", limit=1)
    return held


@pytest.fixture
def signalled():
    """A declared receiver for another type: it hears every end and acts on none of these."""
    seen: list[tuple[int, bool]] = []

    @finished_receiver(Task.Type.TRIGGER, dispatch_uid="test-finish-trips")
    def on_finished(*, task: Task, **kwargs) -> None:
        seen.append((task.pk, connection.in_atomic_block))

    yield seen
    task_finished.disconnect(dispatch_uid="test-finish-trips")


@pytest.mark.parametrize("sync", [True, False])
def test_an_end_that_tells_nobody_is_one_statement(teams, settings, signalled, sync):
    settings.OPENHIVE = {**settings.OPENHIVE, "QUEUE_SYNC_FINISH": sync}
    held = claim(teams[0])
    with CaptureQueriesContext(connection) as captured:
        done = task_finish(task_id=held.pk, worker="w1", status="done", result="ok", held=held)
    sqls = [q["sql"] for q in as_written(captured.captured_queries)]
    # No BEGIN and COMMIT around it (three round trips on PostgreSQL, now one).
    assert len(sqls) == 1 and 'UPDATE "tasks_task"' in sqls[0]
    # Durable unless the operator chose otherwise (OPENHIVE_QUEUE_SYNC_FINISH=false).
    skips_wait = connection.vendor == "postgresql" and not sync
    assert (NO_FLUSH_WAIT in sqls[0]) is skips_wait
    assert done is held and committed_status(held.pk) == "done"
    row = Task.objects.get(pk=held.pk)
    assert (row.result, row.lease_owner, row.lease_expires_at) == ("ok", "", None)
    assert signalled == [(held.pk, False)]  # signalled, the end committed (nothing to add)


def test_a_late_end_of_a_task_no_longer_held_changes_nothing(teams, signalled):
    held = claim(teams[0])
    task_cancel(task_id=held.pk)
    assert task_finish(task_id=held.pk, worker="w1", status="done", result="x", held=held) is None
    assert Task.objects.get(pk=held.pk).status == "cancelled"
    assert signalled == [(held.pk, True)]  # the cancellation's, not the late end's


def test_an_end_that_tells_the_chat_commits_with_its_notice(teams, monkeypatch):
    held = claim(teams[0], source_channel="web:alice")
    seen: list[tuple[bool, str]] = []
    real = task_ends.outbox_put

    def outbox_put(**kwargs):
        seen.append((connection.in_atomic_block, Task.objects.get(pk=held.pk).status))
        return real(**kwargs)

    monkeypatch.setattr(task_ends, "outbox_put", outbox_put)
    assert task_finish(task_id=held.pk, worker="w1", status="done", result="ok", held=held)
    # In the end's own transaction, after its UPDATE: both commit or neither.
    assert seen == [(True, "done")]


def test_an_undeclared_receiver_gets_the_end_inside_its_transaction(teams):
    held = claim(teams[0])
    seen: list[tuple[bool, str]] = []

    def on_finished(*, task: Task, **kwargs) -> None:
        # What it writes commits with the end: nobody else sees the end yet.
        seen.append((connection.in_atomic_block, committed_status(task.pk)))
        transaction.on_commit(lambda: seen.append((False, committed_status(task.pk))))

    task_finished.connect(on_finished, dispatch_uid="test-undeclared")
    try:
        assert end_observed(Task.Type.DELEGATE)
        task_finish(task_id=held.pk, worker="w1", status="done", result="ok", held=held)
    finally:
        task_finished.disconnect(dispatch_uid="test-undeclared")
    assert seen == [(True, "running"), (False, "done")]


def test_the_shipped_receivers_act_only_on_the_types_they_declare():
    assert end_observed(Task.Type.BOOTSTRAP) and end_observed(Task.Type.TRIGGER)
    assert not end_observed(Task.Type.DELEGATE) and not end_observed(Task.Type.QUERY)

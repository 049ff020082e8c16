"""An enqueue wakes the idle pull workers when its task is committed, never before; on
PostgreSQL the announcement travels in the INSERT's own query (one round trip)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from tasks.models import Task
from tasks.services import task_enqueue
from tasks.wake import CHANNEL, Waker, wake_file
from tests.queries import as_written

pytestmark = pytest.mark.django_db(transaction=True)  # commits are what is checked


@pytest.fixture
def listener():
    """PostgreSQL: a connection of its own that LISTENs as a worker's does."""
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    wrapper = connections.create_connection("default")
    wrapper.ensure_connection()
    raw = wrapper.connection
    raw.autocommit = True
    raw.execute(f"LISTEN {CHANNEL}")
    yield raw
    wrapper.close()


def heard(raw, timeout: float) -> list[str]:
    return [n.channel for n in raw.notifies(timeout=timeout, stop_after=1)]


def test_an_enqueue_is_one_query_and_announces_its_task_at_commit(teams, listener):
    with CaptureQueriesContext(connection) as captured:
        task = task_enqueue(team=teams[0], text="work", options={"k": "é"})
    [sql] = [q["sql"] for q in as_written(captured.captured_queries)]
    assert sql.startswith(f"NOTIFY {CHANNEL}; INSERT INTO") and "RETURNING" in sql
    assert heard(listener, 5) == [CHANNEL]
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.text, row.options, row.team_id) == ("pending", "work", {"k": "é"},
                                                                 teams[0].pk)  # fmt: skip
    assert row.created_at == task.created_at and not task._state.adding


def test_an_enqueue_in_a_callers_transaction_is_announced_at_its_commit(teams, listener):
    with transaction.atomic():
        task_enqueue(team=teams[0], text="work")
        assert heard(listener, 0.3) == []  # not before the caller commits
    assert heard(listener, 5) == [CHANNEL]


def test_an_idle_waker_is_woken_by_an_enqueue(teams):
    event, stop = threading.Event(), threading.Event()
    waker = Waker(event, stop)
    waker.start()
    try:
        time.sleep(0.5)  # its LISTEN (or its first look at the file) is in place
        event.clear()
        task_enqueue(team=teams[0], text="work")
        assert event.wait(5)
    finally:
        stop.set()
        waker.thread.join(timeout=5)
    if connection.vendor == "sqlite":
        assert wake_file().exists()


def test_a_save_receiver_of_tasks_still_hears_every_enqueue(teams, listener):
    # The one-query INSERT bypasses save(): with a receiver connected, the task is saved.
    from django.db.models.signals import post_save

    saved: list[int] = []

    def receiver(sender, instance, created, **kwargs):
        saved.append(instance.pk)

    post_save.connect(receiver, sender=Task, dispatch_uid="test-enqueue-receiver")
    try:
        task = task_enqueue(team=teams[0], text="work")
    finally:
        post_save.disconnect(dispatch_uid="test-enqueue-receiver", sender=Task)
    assert saved == [task.pk]
    assert heard(listener, 5) == [CHANNEL]


def test_an_enqueued_row_is_the_one_save_would_write_and_receivers_still_hear_it(teams):
    # Without a receiver the row goes in by a plain INSERT (one query on PostgreSQL, RETURNING
    # its key on SQLite), not save(): it must be the same row, and a receiver must still hear.
    from django.db.models.signals import post_save

    queued = Task.objects.get(pk=task_enqueue(team=teams[0], text="same", priority=1).pk)
    saved = Task(team=teams[0], text="same", priority=1, options={})
    saved.save(force_insert=True)
    saved = Task.objects.get(pk=saved.pk)
    differ = {"id", "created_at"}
    fields = [f.attname for f in Task._meta.concrete_fields if f.attname not in differ]
    assert [getattr(queued, f) for f in fields] == [getattr(saved, f) for f in fields]
    assert queued.created_at is not None

    heard_saves: list[int] = []
    post_save.connect(
        lambda sender, instance, **kw: heard_saves.append(instance.pk),
        sender=Task,
        dispatch_uid="test-enqueue-row",
        weak=False,
    )
    try:
        task = task_enqueue(team=teams[0], text="heard")
    finally:
        post_save.disconnect(dispatch_uid="test-enqueue-row", sender=Task)
    assert heard_saves == [task.pk]

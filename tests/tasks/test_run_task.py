"""run_task(task_id) end to end, in process, with the scripted provider."""

from __future__ import annotations

import time

import pytest
from pydantic import BaseModel, ConfigDict

from openhive.chat.models import OutboxMessage
from openhive.core import registry
from openhive.core.registry import tool
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.org.services import team_spawn
from tasks import runner
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_cancel, task_enqueue
from teams.models import Team
from tests.factories import claim

# run_task closes stale connections as a worker must, so these tests commit for real.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ops(main_team):
    return team_spawn(parent=main_team, name="ops", description="Operations").team


def reload(task: Task) -> Task:
    task.refresh_from_db()
    return task


def test_delegated_task_runs_to_done_and_reports_to_the_chat(ops, scripted_provider):
    scripted_provider(
        [
            {"when": {"team": "ops", "matches": "disk"}, "reply": {"content": "Disk is at 40%."}},
        ]
    )
    task = task_enqueue(team=ops, text="Check the disk", source_channel="web:alice")
    assert run_task(task.pk) == "done"
    task = reload(task)
    assert task.status == "done" and task.result == "Disk is at 40%."
    assert task.attempts == 1 and task.lease_owner == "" and task.finished_at is not None
    session = Session.objects.get(task=task)
    assert session.team == ops and session.kind == "task" and session.stop_reason == "completed"
    assert LlmExchange.objects.filter(session=session).count() == 1
    note = OutboxMessage.objects.get()
    assert note.content == "[ops] Disk is at 40%." and note.channel_id == "web:alice"
    assert note.task_id == task.pk


def test_bootstrap_task_marks_the_team_ready(ops, scripted_provider):
    scripted_provider([{"when": {"team": "ops"}, "reply": {"content": "Ready for ops work."}}])
    task = ops.tasks.get(type=Task.Type.BOOTSTRAP)
    Task.objects.filter(pk=task.pk).update(source_channel="web:alice")
    assert run_task(task.pk) == "done"
    assert Team.objects.get(pk=ops.pk).bootstrapped is True
    result = reload(task).result
    assert result.startswith("Ready for ops work.\n\nBuilt: subagents: none; skills: none")
    assert OutboxMessage.objects.get().content == "[ops] Team bootstrapped and ready."


def test_bootstrap_of_a_ready_team_needs_no_session(ops, scripted_provider):
    Team.objects.filter(pk=ops.pk).update(bootstrapped=True)
    task = ops.tasks.get(type=Task.Type.BOOTSTRAP)
    assert run_task(task.pk) == "done"
    assert reload(task).result == "already bootstrapped"
    assert not Session.objects.exists()


def test_a_session_with_tool_calls_runs_the_tools_as_the_team(ops, scripted_provider):
    scripted_provider(
        [
            {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "list_teams"}]}},
            {"when": {"last": "tool", "tool": "list_teams"}, "reply": {"content": "No children."}},
        ]
    )
    task = task_enqueue(team=ops, text="list")
    assert run_task(task.pk) == "done"
    call = ToolCall.objects.get()
    assert call.team == ops and call.tool == "list_teams" and call.success
    assert call.session.task_id == task.pk


def test_a_task_that_cannot_be_claimed_is_not_run(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    task = task_enqueue(team=ops, text="x")
    claim(task_id=task.pk, worker="someone-else")
    assert run_task(task.pk) == "not-claimed"
    assert reload(task).lease_owner == "someone-else"
    assert not Session.objects.exists()
    assert run_task(987654) == "not-claimed"


def test_a_cancelled_task_is_not_run(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    task = task_enqueue(team=ops, text="x")
    task_cancel(task_id=task.pk)
    assert run_task(task.pk) == "not-claimed"
    assert reload(task).status == "cancelled" and not Session.objects.exists()


def test_a_failed_session_fails_the_task_with_the_error(ops):
    # No providers.yaml: the session ends with an error that says how to configure one.
    task = task_enqueue(team=ops, text="x", source_channel="web:alice")
    assert run_task(task.pk) == "failed"
    task = reload(task)
    assert task.status == "failed" and task.result.startswith("Error: ")
    assert "providers.yaml" in task.result
    assert OutboxMessage.objects.get().content == f"[ops] {task.result}"


def test_a_crash_is_recorded_as_a_failure(ops, scripted_provider, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("worker exploded")

    monkeypatch.setattr(runner, "run_team_session", crash)
    task = task_enqueue(team=ops, text="x")
    assert run_task(task.pk) == "failed"
    task = reload(task)
    assert task.status == "failed" and task.result == "Error: RuntimeError: worker exploded"
    assert task.lease_owner == ""


def test_max_turns_option_limits_the_session(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"tool_calls": [{"name": "list_teams"}]}}])
    task = task_enqueue(team=ops, text="loop", options={"max_turns": 2})
    assert run_task(task.pk) == "failed"
    session = Session.objects.get(task=task)
    assert session.stop_reason == "max_turns" and session.turns == 2
    assert reload(task).result.startswith("[Session stopped after 2 turns")


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


@pytest.fixture
def cancel_tool():
    """A tool that cancels the task it runs in, as an operator would from elsewhere."""
    before = set(registry._REGISTRY)

    @tool(name="zz_cancel_me", description="Cancel my own task", args=_NoArgs)
    def cancel_me(ctx, args):
        task_cancel(task_id=ctx.task_id, reason="stopped by the operator")
        return {"cancelled": True}

    yield
    for name in set(registry._REGISTRY) - before:
        del registry._REGISTRY[name]


def test_cancelling_a_running_task_stops_its_session_and_keeps_cancelled(
    ops, scripted_provider, cancel_tool
):
    scripted_provider(
        [
            {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "zz_cancel_me"}]}},
            {"when": {}, "reply": {"content": "finished anyway"}},
        ]
    )
    task = task_enqueue(team=ops, text="x", source_channel="web:alice")
    assert run_task(task.pk) == "cancelled"  # the late result never overwrites it
    task = reload(task)
    assert task.status == "cancelled" and task.result == "stopped by the operator"
    session = Session.objects.get(task=task)
    assert session.stop_reason == "cancelled" and session.turns == 1
    assert not OutboxMessage.objects.exists()


def test_a_worker_keeps_its_database_connection_from_task_to_task(ops, scripted_provider):
    """A new connection per task costs a PostgreSQL backend's start: a sound one is kept."""
    from django.db import connection

    scripted_provider([{"when": {}, "reply": {"content": "done"}}])
    assert run_task(task_enqueue(team=ops, text="one").pk) == Task.Status.DONE
    kept = connection.connection
    assert run_task(task_enqueue(team=ops, text="two").pk) == Task.Status.DONE
    assert kept is not None and connection.connection is kept


def test_a_connection_that_saw_an_error_and_no_longer_answers_is_replaced(
    ops, scripted_provider, monkeypatch
):
    from django.db import connections

    connection = connections["default"]

    scripted_provider([{"when": {}, "reply": {"content": "done"}}])
    assert run_task(task_enqueue(team=ops, text="one").pk) == Task.Status.DONE
    task = task_enqueue(team=ops, text="two")
    broken = connection.connection
    connection.errors_occurred = True
    monkeypatch.setattr(type(connection), "is_usable", lambda self: False)
    assert run_task(task.pk) == Task.Status.DONE
    assert connection.connection is not None and connection.connection is not broken


def test_a_running_tasks_lease_is_renewed_while_its_session_runs(
    ops, scripted_provider, settings, monkeypatch
):
    from tasks import leases

    settings.OPENHIVE = {**settings.OPENHIVE, "LEASE_SECONDS": 3}  # renewed every second
    renewals: list[tuple[int, bool]] = []
    original = leases.task_renew_lease

    def renew(*, task_id: int, worker: str) -> bool:
        held = original(task_id=task_id, worker=worker)
        renewals.append((task_id, held))
        return held

    monkeypatch.setattr(leases, "task_renew_lease", renew)
    scripted_provider([{"when": {}, "reply": {"content": "slow", "delay_ms": 1500}}])
    task = task_enqueue(team=ops, text="take your time")
    assert run_task(task.pk) == Task.Status.DONE
    assert (task.pk, True) in renewals
    # Once the run is over its task is no longer renewed.
    count = len(renewals)
    time.sleep(1.2)
    assert len(renewals) == count


def test_the_lease_keeper_lets_go_of_its_connection_once_no_lease_is_left(
    ops, scripted_provider, settings, monkeypatch
):
    # An idle connection kept by the keeper holds a server slot for nothing, and keeps its
    # database from being dropped (the test database's teardown failed on it).
    import threading

    from tasks import leases

    settings.OPENHIVE = {**settings.OPENHIVE, "LEASE_SECONDS": 3}  # renewed every second
    closed_by: list[str] = []
    close_all = leases.connections.close_all

    def spy() -> None:
        closed_by.append(threading.current_thread().name)
        close_all()

    monkeypatch.setattr(leases.connections, "close_all", spy)
    scripted_provider([{"when": {}, "reply": {"content": "slow", "delay_ms": 1500}}])
    task = task_enqueue(team=ops, text="long enough for a renewal")
    assert run_task(task.pk) == Task.Status.DONE
    deadline = time.monotonic() + 3
    while "lease-keeper" not in closed_by and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "lease-keeper" in closed_by

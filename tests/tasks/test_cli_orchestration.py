"""`manage.py openhive delegate/status/worker` show the orchestration state."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.services import task_enqueue
from tests.factories import claim

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(main_team):
    team = team_spawn(parent=main_team, name="ops", scope_accepts=["ops"]).team
    Task.objects.all().delete()
    return team


def run(*args: str) -> str:
    out = StringIO()
    call_command("openhive", *args, stdout=out)
    return out.getvalue()


def test_status_shows_running_against_the_cap_and_pending(ops):
    running = task_enqueue(team=ops, text="a")
    claim(task_id=running.pk, worker="w")
    task_enqueue(team=ops, text="b")
    assert "ops [active, bootstrapping] pending 1, running 1/5" in run("status")


def test_delegate_applies_the_overlap_policy(ops):
    assert "queued for ops (high; 0 in flight before it)" in run(
        "delegate", "ops", "check disk", "--priority", "high"
    )
    with pytest.raises(SystemExit):
        run("delegate", "ops", "again", "--overlap", "skip")
    assert Task.objects.count() == 1
    out = run("delegate", "ops", "instead", "--overlap", "replace")
    assert "1 in flight before it; cancelled [" in out
    assert sorted(Task.objects.values_list("status", flat=True)) == ["cancelled", "pending"]


@pytest.mark.django_db(transaction=True)
def test_worker_runs_queued_tasks_and_exits_when_idle(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "worked"}}])
    tasks = [task_enqueue(team=ops, text=f"t{i}") for i in range(3)]
    out = run("worker", "--threads", "2", "--exit-when-idle", "0.5", "--poll", "0.05")
    assert "running 2 thread(s)" in out
    assert [Task.objects.get(pk=t.pk).status for t in tasks] == ["done"] * 3

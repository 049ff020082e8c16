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


@pytest.mark.django_db(transaction=True)
def test_a_verb_runs_the_system_checks_but_the_url_configurations(ops, system_check):
    from django.core import checks
    from django.core.management.base import SystemCheckError

    # As from the shell: call_command alone would skip the checks for every verb.
    # The URLconf imports the admin and the API: status needs neither.
    system_check("urls", checks.Error("broken urls check", id="test.E001"))
    out = StringIO()
    call_command("openhive", "status", skip_checks=False, stdout=out)
    assert "ops [active" in out.getvalue()
    # A model check still guards every verb.
    system_check("models", checks.Error("broken models check", id="test.E002"))
    with pytest.raises(SystemCheckError, match="broken models check"):
        call_command("openhive", "status", skip_checks=False, stdout=StringIO())


@pytest.mark.django_db(transaction=True)
def test_worker_runs_no_system_check_and_serve_leaves_the_urls_to_its_web_process(
    ops, system_check
):
    from django.core import checks

    from openhive.cli import VERBS
    from openhive.management.commands.openhive import system_checks_for

    system_check("models", checks.Error("broken models check", id="test.E001"))
    call_command("openhive", "worker", "--exit-when-idle", "0.1", "--poll", "0.05",
                 skip_checks=False, stdout=StringIO())  # fmt: skip
    assert system_checks_for(VERBS["worker"]) == []
    for verb in ("serve", "status"):
        assert "urls" not in system_checks_for(VERBS[verb])
        assert "models" in system_checks_for(VERBS[verb])


@pytest.mark.django_db(transaction=True)
def test_worker_announces_itself_to_serve_and_beats_until_it_stops(
    ops, scripted_provider, monkeypatch, tmp_path
):
    import os

    from openhive.engine.models import WorkerBeat

    monkeypatch.setenv("OPENHIVE_READY_DIR", str(tmp_path))
    run("worker", "--threads", "3", "--exit-when-idle", "0.1", "--poll", "0.05")
    assert (tmp_path / f"worker-{os.getpid()}").exists()  # what serve's banner waits for
    assert not WorkerBeat.objects.exists()  # a clean stop takes its row away
    monkeypatch.setattr("openhive.cli.worker.worker_gone", lambda **_: None)
    run("worker", "--threads", "3", "--exit-when-idle", "0.1", "--poll", "0.05")
    beat = WorkerBeat.objects.get()
    assert beat.name.endswith(f":{os.getpid()}") and beat.threads == 3 and beat.busy == 0

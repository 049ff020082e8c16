"""A trigger that names a subagent runs that subagent's session directly: the task runner
routes on the task's options, no orchestrator model call decides."""

from __future__ import annotations

import pytest

from openhive.core import paths
from openhive.engine.models import LlmExchange, Session
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from triggers.services import trigger_create, trigger_test
from triggers.services.firing import task_text

pytestmark = pytest.mark.django_db(transaction=True)

SCANNER = "---\ndescription: Scans the logs\ntools: [read_file, grep]\n---\nYou scan logs.\n"


@pytest.fixture
def ops(main_team):
    team = team_spawn(parent=main_team, name="ops", description="Operations").team
    Task.objects.filter(team=team).delete()
    folder = paths.team_dir("ops") / "subagents"
    (folder / "scanner.md").write_text(SCANNER)
    return team


@pytest.fixture
def scanner_trigger(ops):
    return trigger_create(
        team=ops,
        name="nightly-scan",
        type="schedule",
        config={"cron": "0 2 * * *"},
        task="Scan last night's logs for errors.",
        subagent="scanner",
    )


ORCHESTRATOR_WOULD_ROUTE = {
    "when": {"team": "ops"},
    "reply": {
        "tool_calls": [{"name": "run_subagent", "arguments": {"name": "scanner", "task": "x"}}]
    },
}


def test_a_trigger_naming_a_subagent_runs_it_without_an_orchestrator_call(
    ops, scanner_trigger, scripted_provider
):
    scripted_provider(
        [
            ORCHESTRATOR_WOULD_ROUTE,
            {"when": {"team": "ops/scanner"}, "reply": {"content": "No errors last night."}},
        ]
    )
    fired = trigger_test(trigger=scanner_trigger)
    task = Task.objects.get(pk=fired.task_id)
    assert task.options["subagent"] == "scanner"
    assert "Hand this" not in task.text and "Scan last night's logs" in task.text
    assert run_task(task.pk) == "done"
    task.refresh_from_db()
    assert task.result == "No errors last night."
    session = Session.objects.get()  # the subagent's own session, and no other
    assert session.kind == "subagent" and session.agent_name == "scanner"
    assert session.task_id == task.pk and session.spec_options["depth"] == 1
    assert LlmExchange.objects.filter(session=session).count() == 1
    offered = LlmExchange.objects.get(session=session).tools
    assert sorted(offered) == ["grep", "read_file"]


def test_a_routed_subagent_that_was_deleted_fails_the_task_clearly(
    ops, scanner_trigger, scripted_provider
):
    scripted_provider([ORCHESTRATOR_WOULD_ROUTE])
    fired = trigger_test(trigger=scanner_trigger)
    (paths.team_dir("ops") / "subagents" / "scanner.md").unlink()
    assert run_task(fired.task_id) == "failed"
    task = Task.objects.get(pk=fired.task_id)
    assert 'unknown subagent "scanner" for team "ops"' in task.result
    session = Session.objects.get()
    assert session.kind == "subagent" and session.stop_reason == "error"
    assert not LlmExchange.objects.exists()


def test_a_task_for_the_main_team_naming_a_subagent_fails(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "routed"}}])
    task = task_enqueue(team=main_team, text="x", options={"subagent": "writer"})
    assert run_task(task.pk) == "failed"
    task.refresh_from_db()
    assert "the main agent has no subagents" in task.result


def test_a_routed_trigger_text_carries_no_routing_sentence(ops, scanner_trigger):
    scanner_trigger.skill = "triage"
    text = task_text(scanner_trigger)
    assert "subagent" not in text and "triage" not in text
    # The trigger's own text, then only the notify contract every trigger run carries.
    own, _, rest = text.partition("Scan last night's logs for errors.")
    assert own == "[trigger nightly-scan (schedule)]\n\n"
    assert rest.lstrip().startswith("## Notification decision")


def test_a_trigger_naming_a_subagent_whose_file_does_not_load_is_refused(ops):
    from triggers.validation import InvalidTrigger

    (paths.team_dir("ops") / "subagents" / "broken.md").write_text("no front matter")
    with pytest.raises(InvalidTrigger) as caught:
        trigger_create(
            team=ops,
            name="broken-run",
            type="schedule",
            config={"cron": "0 2 * * *"},
            task="x",
            subagent="broken",
        )
    assert "subagents/broken.md must start with a front matter block" in caught.value.message

"""A trigger that names a skill delivers the skill's body to the run it starts (and its
required tools), through the real firing and the worker's run_task, with the scripted
provider; the session replays identically."""

from __future__ import annotations

import json

import pytest

from openhive.core import paths
from openhive.engine.models import Session
from tasks.models import Task
from tasks.runner import run_task
from teams.config import default_config, write_team_config
from teams.services import team_workspace_scaffold
from tests.engine.replay_support import replay
from tests.factories import TeamFactory
from tests.teams.skill_support import write_skill
from triggers.services import trigger_create, trigger_enable, trigger_fire, trigger_update
from triggers.validation import InvalidTrigger

# run_task closes stale connections as a worker must, so these tests commit for real.
pytestmark = pytest.mark.django_db(transaction=True)
BODY_MARK = "Write the weekly disk report"


@pytest.fixture
def ops(main_team, scripted_provider):
    team = TeamFactory(name="ops", parent=main_team, description="Operations")
    team_workspace_scaffold(paths.team_dir("ops"))
    write_team_config(
        default_config("ops", parent="main").model_copy(
            update={"allowed_tools": ["activate_skill", "bash", "read_file"]}
        )
    )
    scripted_provider(
        [
            {"when": {"team": "ops", "matches": BODY_MARK}, "reply": {"content": "followed"}},
            {"when": {}, "reply": {"content": "no skill seen"}},
        ]
    )
    return team


def fire(trigger) -> Task:
    result = trigger_fire(trigger_id=trigger.pk, event_key="slot-1")
    assert result.outcome == "fired", result
    return Task.objects.get(pk=result.task_id)


def test_a_trigger_naming_a_skill_delivers_its_body_and_tools_to_the_run(ops):
    write_skill("ops", "disk-report")
    trigger = trigger_enable(
        trigger=trigger_create(
            team=ops,
            name="weekly",
            type="schedule",
            config={"cron": "0 9 * * 1"},
            task="Report on the disks.",
            skill="disk-report",
        )
    )
    task = fire(trigger)
    assert task.options["skill"] == "disk-report"
    assert run_task(task.pk) == "done"
    task.refresh_from_db()
    assert task.result == "followed"
    session = Session.objects.get(task=task)
    assert session.spec_options["skills"] == ["disk-report"]
    (exchange,) = session.exchanges.all()
    system, user = exchange.request_messages[0], exchange.request_messages[-1]
    assert BODY_MARK not in json.dumps(system)  # the index only, never the body
    assert user["role"] == "user" and "Report on the disks." in user["content"]
    assert "--- Skill `disk-report` (given with this task: follow it) ---" in user["content"]
    assert BODY_MARK in user["content"]
    # The skill requires bash and web_fetch: bash is offered, web_fetch is not allowed.
    assert "bash" in exchange.tools and "web_fetch" not in exchange.tools
    assert replay(session.pk).identical


def test_a_trigger_naming_a_missing_or_broken_skill_is_refused(ops):
    with pytest.raises(InvalidTrigger, match='no skill "disk-report"'):
        trigger_create(
            team=ops,
            name="weekly",
            type="schedule",
            config={"cron": "0 9 * * 1"},
            task="x",
            skill="disk-report",
        )
    write_skill("ops", "disk-report", description=None)
    with pytest.raises(InvalidTrigger, match="no `description`"):
        trigger_create(
            team=ops,
            name="weekly",
            type="schedule",
            config={"cron": "0 9 * * 1"},
            task="x",
            skill="disk-report",
        )
    write_skill("ops", "triage")
    trigger = trigger_create(
        team=ops, name="weekly", type="schedule", config={"cron": "0 9 * * 1"}, task="x"
    )
    with pytest.raises(InvalidTrigger, match="cannot be used"):
        trigger_update(trigger=trigger, changes={"skill": "disk-report"})


def test_a_skill_broken_after_the_trigger_was_made_fails_the_task_with_the_reason(ops):
    path = write_skill("ops", "disk-report")
    trigger = trigger_enable(
        trigger=trigger_create(
            team=ops,
            name="weekly",
            type="schedule",
            config={"cron": "0 9 * * 1"},
            task="Report on the disks.",
            skill="disk-report",
        )
    )
    path.write_text("no front matter any more")
    task = fire(trigger)
    assert run_task(task.pk) == "failed"
    task.refresh_from_db()
    assert task.result.startswith("Error: the task's skill cannot be used:")
    assert "no front matter" in task.result
    assert not Session.objects.filter(task=task).exists()

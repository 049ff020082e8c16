"""A reflection cycle makes at most one change: a skill edit applies at once; a subagent's
front matter is identity, proposed to the parent orchestrator and applied only when it
confirms; every applied change can be reverted (file restored). Refusals change nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from evolution.models import CycleChange
from openhive.core import paths
from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from teams.models import TeamMessage
from tests.factories import TeamFactory
from vault.services import vault_read

from .conftest import SCOUT, START, call, fired_task

pytestmark = pytest.mark.django_db
SKILL = "---\nname: triage\ndescription: Triage\n---\n1. Read the log.\n"
BETTER = SKILL + "2. Check the disk first.\n"
NEW_IDENTITY = "---\ndescription: Researches backups only\n---\nYou research the field.\n"


@pytest.fixture
def skill_file(ops):
    path = paths.team_dir("ops") / "skills" / "triage" / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SKILL)
    return path


def propose(ops, task, path: str, content: str) -> dict:
    return call(
        ops,
        "propose_change",
        task,
        path=path,
        content=content,
        reason="three failed tasks skipped the disk check",
        task_ids=[1, 2],
        session_ids=[3],
    )


def orchestrator(caller, tool: str, **arguments) -> dict:
    return call_tool(ToolContext(team=caller, actor=caller.name), tool, arguments)


def test_an_identity_change_is_proposed_confirmed_by_the_parent_and_reverted(
    ops, main_team, cycle_trigger, admin_client
):
    scout = paths.team_dir("ops") / "subagents" / "scout.md"
    with time_machine.travel(START, tick=False):
        task = fired_task(cycle_trigger("reflection"))
        proposed = propose(ops, task, "subagents/scout.md", NEW_IDENTITY)
    assert proposed["success"] and proposed["status"] == "proposed" and proposed["identity"]
    assert scout.read_text() == SCOUT  # not applied yet
    message = TeamMessage.objects.get(recipient=main_team, sender=ops)
    assert f"#{proposed['change_id']}" in message.content and "confirm_change" in message.content

    stranger = TeamFactory(name="stranger", parent=main_team)
    refused = orchestrator(stranger, "confirm_change", team="ops", change_id=proposed["change_id"])
    assert not refused["success"] and scout.read_text() == SCOUT

    confirmed = orchestrator(
        main_team, "confirm_change", team="ops", change_id=proposed["change_id"]
    )
    assert confirmed["success"] and confirmed["status"] == "applied"
    assert scout.read_text() == NEW_IDENTITY
    change = CycleChange.objects.get()
    assert change.decided_by == "main" and change.evidence["task_ids"] == [1, 2]

    url = reverse("admin:evolution_cyclechange_changelist")
    answer = admin_client.post(
        url, {"action": "revert_changes", "_selected_action": [change.pk]}, follow=True
    )
    assert answer.status_code == 200
    change.refresh_from_db()
    assert change.status == "reverted" and change.reverted_by.startswith("admin:")
    assert scout.read_text() == SCOUT
    page = admin_client.get(reverse("admin:evolution_cyclechange_change", args=[change.pk]))
    assert page.status_code == 200 and b"Researches backups only" in page.content


def test_a_rejected_proposal_leaves_the_file(ops, main_team, cycle_trigger):
    task = fired_task(cycle_trigger("reflection"))
    change_id = propose(ops, task, "subagents/scout.md", NEW_IDENTITY)["change_id"]
    assert orchestrator(main_team, "reject_change", team="ops", change_id=change_id)["success"]
    again = orchestrator(main_team, "confirm_change", team="ops", change_id=change_id)
    assert not again["success"] and again["code"] == "NOT_PROPOSED"
    assert (paths.team_dir("ops") / "subagents" / "scout.md").read_text() == SCOUT


def test_a_skill_change_applies_once_per_cycle_and_waits_out_its_cooldown(
    ops, cycle_trigger, skill_file
):
    trigger = cycle_trigger("reflection")
    with time_machine.travel(START, tick=False):
        first = fired_task(trigger, key="c1", now=START)
        applied = propose(ops, first, "skills/triage/SKILL.md", BETTER)
        assert applied["success"] and applied["status"] == "applied" and not applied["identity"]
        assert skill_file.read_text() == BETTER
        journal = vault_read(team=ops, key="reflection:ops:scout:journal").value
        assert f'"changes": [{applied["change_id"]}]' in journal
        second = propose(ops, first, "subagents/scout.md", SCOUT + "More.\n")
        assert not second["success"] and second["code"] == "ONE_CHANGE_PER_CYCLE"

    later = START + timedelta(hours=5)
    with time_machine.travel(later, tick=False):
        task = fired_task(trigger, key="c2", now=later)
        cooled = propose(ops, task, "skills/triage/SKILL.md", SKILL)
        assert not cooled["success"] and cooled["code"] == "COOLDOWN"
        assert skill_file.read_text() == BETTER

    much_later = START + timedelta(hours=30)
    with time_machine.travel(much_later, tick=False):
        task = fired_task(trigger, key="c3", now=much_later)
        assert propose(ops, task, "skills/triage/SKILL.md", SKILL)["success"]
    assert skill_file.read_text() == SKILL


def test_a_change_outside_skills_and_subagents_or_unusable_is_refused(ops, cycle_trigger):
    task = fired_task(cycle_trigger("reflection"))
    for path in ("config.yaml", "../other/skills/x/SKILL.md", "/etc/passwd", "notes.md"):
        refused = propose(ops, task, path, "x")
        assert not refused["success"], path
    broken = propose(ops, task, "subagents/scout.md", "no front matter")
    assert not broken["success"] and "front matter" in broken["error"]
    assert not CycleChange.objects.exists()
    assert (paths.team_dir("ops") / "subagents" / "scout.md").read_text() == SCOUT


def test_propose_change_in_a_learning_cycle_is_refused(ops, cycle_trigger, skill_file):
    task = fired_task(cycle_trigger("learning"))
    refused = propose(ops, task, "skills/triage/SKILL.md", BETTER)
    assert not refused["success"] and refused["code"] == "NOT_IN_CYCLE"


def test_the_change_page_offers_the_decisions_its_status_allows(
    ops, main_team, cycle_trigger, admin_client
):
    scout = paths.team_dir("ops") / "subagents" / "scout.md"
    with time_machine.travel(START, tick=False):
        task = fired_task(cycle_trigger("reflection"))
        proposed = propose(ops, task, "subagents/scout.md", NEW_IDENTITY)
    change_id = proposed["change_id"]
    page_url = reverse("admin:evolution_cyclechange_change", args=[change_id])

    def decide(verb: str):
        url = reverse("admin:evolution_cyclechange_decide", args=[change_id, verb])
        return admin_client.post(url, follow=True)

    page = admin_client.get(page_url).content.decode()
    assert "Confirm and apply" in page and "Reject" in page
    assert "Revert to the previous content" not in page
    assert (
        admin_client.get(
            reverse("admin:evolution_cyclechange_decide", args=[change_id, "confirm"])
        ).status_code
        == 405
    )  # a decision is a POST, never a link a crawler could follow
    assert (
        admin_client.post(
            reverse("admin:evolution_cyclechange_decide", args=[change_id, "delete"])
        ).status_code
        == 404
    )
    assert scout.read_text() == SCOUT

    answer = decide("confirm")
    assert answer.status_code == 200 and "Applied 1 change(s)" in answer.content.decode()
    assert scout.read_text() == NEW_IDENTITY
    page = answer.content.decode()
    assert "Revert to the previous content" in page and "Confirm and apply" not in page

    again = decide("confirm")  # already applied: a clear error, nothing changes
    assert f"#{change_id}:" in again.content.decode()
    decide("revert")
    assert scout.read_text() == SCOUT
    assert CycleChange.objects.get(pk=change_id).status == "reverted"
    assert "cycle-change-decisions" not in admin_client.get(page_url).content.decode()

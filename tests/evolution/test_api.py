"""GET /api/v1/learning/{team}: the team's cycle triggers with their readiness, runs, journals,
learnings and changes; the operator's confirm and revert doors; clear 4xx answers."""

from __future__ import annotations

import pytest

from openhive.core import paths
from teams.models import Team

from .conftest import call, fired_task

pytestmark = pytest.mark.django_db


def test_the_learning_page_lists_triggers_readiness_runs_journal_and_changes(
    ops,
    cycle_trigger,
    api_client,
):
    learning = cycle_trigger("learning")
    reflection = cycle_trigger("reflection")
    task = fired_task(learning)
    call(ops, "record_learning", task, topic="disks", insight="SMART lies.", confidence="medium")
    Team.objects.filter(pk=ops.pk).update(bootstrapped=False)
    answer = api_client.get("/api/v1/learning/ops")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    triggers = {t["name"]: t for t in body["triggers"]}
    assert set(triggers) == {learning.name, reflection.name}
    assert not triggers[reflection.name]["ready"]
    assert "not bootstrapped" in triggers[reflection.name]["not_ready_reason"]
    (run,) = body["runs"]
    assert run["outcome"] == "started" and run["task_id"] == task.pk
    assert body["journals"]["learning:scout"]["entries"][0]["run"] == run["id"]
    assert body["learnings"][0]["topic"] == "disks"
    (change,) = body["changes"]
    assert change["target"] == "lesson:scout:disks" and change["status"] == "applied"

    reverted = api_client.post(f"/api/v1/learning/changes/{change['id']}/revert")
    assert reverted.status_code == 200 and reverted.json()["status"] == "reverted"
    again = api_client.post(f"/api/v1/learning/changes/{change['id']}/revert")
    assert again.status_code == 409 and "only an applied change" in again.json()["detail"]


def test_confirm_through_the_api_applies_a_proposal(ops, cycle_trigger, api_client):
    task = fired_task(cycle_trigger("reflection"))
    new = "---\ndescription: Other\n---\nBody\n"
    change_id = call(
        ops, "propose_change", task, path="subagents/scout.md", content=new, reason="evidence"
    )["change_id"]
    answer = api_client.post(f"/api/v1/learning/changes/{change_id}/confirm")
    assert answer.status_code == 200 and answer.json()["decided_by"] == "operator"
    assert (paths.team_dir("ops") / "subagents" / "scout.md").read_text() == new


def test_unknown_team_or_change_is_a_404(api_client):
    assert api_client.get("/api/v1/learning/nope").status_code == 404
    assert api_client.post("/api/v1/learning/changes/999/revert").status_code == 404

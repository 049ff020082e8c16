"""REST doors onto the orchestration services: spawn, shutdown, scope, status; enqueue with an
overlap policy, requeue, stop_reason filter."""

from __future__ import annotations

import pytest

from openhive.core import paths
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.services import task_cancel, task_enqueue
from teams.models import Team
from tests.factories import claim
from vault.models import VaultEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(main_team):
    return team_spawn(parent=main_team, name="ops", scope_accepts=["ops"]).team


def test_spawn_creates_the_team_and_queues_its_bootstrap(api_client, main_team):
    response = api_client.post(
        "/api/v1/teams",
        {
            "name": "web",
            "description": "Web",
            "scope_accepts": ["html"],
            "credentials": {"TOKEN": "tok-123456789"},
        },
        content_type="application/json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "queued" and body["team"]["name"] == "web"
    assert body["team"]["parent"] == "main" and body["team"]["keywords"] == ["html"]
    assert Task.objects.get(pk=body["bootstrap_task_id"]).type == "bootstrap"
    assert VaultEntry.objects.filter(team__name="web", key="TOKEN").exists()
    assert "tok-123456789" not in response.content.decode()


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"name": "Bad Name", "scope_accepts": ["x"]}, 400),
        ({"name": "web", "scope_accepts": []}, 422),
        ({"name": "web", "scope_accepts": [" "]}, 400),
        ({"name": "web", "scope_accepts": ["x"], "parent": "ghost"}, 404),
        ({"name": "ops", "scope_accepts": ["x"]}, 409),
    ],
)
def test_bad_spawn_is_4xx_json_and_changes_nothing(api_client, ops, payload, status):
    before = Team.objects.count()
    response = api_client.post("/api/v1/teams", payload, content_type="application/json")
    assert response.status_code == status and "detail" in response.json()
    assert Team.objects.count() == before


def test_shutdown_refuses_children_without_cascade_then_removes_all(
    api_client, ops, django_capture_on_commit_callbacks
):
    team_spawn(parent=ops, name="ops-db", scope_accepts=["db"])
    refused = api_client.delete("/api/v1/teams/ops")
    assert refused.status_code == 409 and "ops-db" in refused.json()["detail"]
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.delete("/api/v1/teams/ops?cascade=true")
    assert response.status_code == 200 and response.json() == {"removed": ["ops-db", "ops"]}
    assert not Team.objects.filter(name__startswith="ops").exists()
    assert not paths.team_dir("ops").exists()
    assert api_client.delete("/api/v1/teams/main").status_code == 400
    assert api_client.delete("/api/v1/teams/ghost").status_code == 404


def test_scope_patch_applies_the_delta_and_refuses_zero(api_client, ops):
    ok = api_client.patch(
        "/api/v1/teams/ops/scope",
        {"add": ["Disk"], "remove": []},
        content_type="application/json",
    )
    assert ok.status_code == 200 and ok.json() == {"team": "ops", "scope": ["disk", "ops"]}
    zero = api_client.patch(
        "/api/v1/teams/ops/scope", {"remove": ["disk", "ops"]}, content_type="application/json"
    )
    assert zero.status_code == 400 and "zero scope keywords" in zero.json()["detail"]
    empty = api_client.patch("/api/v1/teams/ops/scope", {}, content_type="application/json")
    assert empty.status_code == 400


def test_team_status_endpoint(api_client, ops):
    body = api_client.get("/api/v1/teams/ops/status").json()
    assert body["team"] == "ops" and body["queue_depth"] == 1  # the bootstrap task
    assert body["max_concurrent_daily_ops"] == 5 and body["saturation"] is False


def test_enqueue_with_overlap_policies(api_client, ops):
    queued = api_client.post(
        "/api/v1/tasks",
        {"team": "ops", "text": "check disk", "priority": "high"},
        content_type="application/json",
    )
    assert queued.status_code == 201
    body = queued.json()
    assert body["status"] == "queued" and body["task"]["priority"] == "high"
    assert len(body["in_flight"]) == 1  # the bootstrap
    skipped = api_client.post(
        "/api/v1/tasks",
        {"team": "ops", "text": "again", "overlap_policy": "skip"},
        content_type="application/json",
    )
    assert skipped.status_code == 409 and skipped.json()["status"] == "skipped"
    replaced = api_client.post(
        "/api/v1/tasks",
        {"team": "ops", "text": "instead", "overlap_policy": "replace"},
        content_type="application/json",
    )
    assert replaced.status_code == 201 and len(replaced.json()["replaced_task_ids"]) == 2
    bad = api_client.post(
        "/api/v1/tasks", {"team": "ops", "text": ""}, content_type="application/json"
    )
    assert bad.status_code == 422
    assert (
        api_client.post(
            "/api/v1/tasks", {"team": "ghost", "text": "x"}, content_type="application/json"
        ).status_code
        == 404
    )


def test_requeue_makes_a_new_pending_copy_of_a_cancelled_task(api_client, ops):
    task = task_enqueue(team=ops, text="flaky", priority=Task.Priority.LOW)
    claim(task_id=task.pk, worker="w")
    task_cancel(task_id=task.pk)
    response = api_client.post(f"/api/v1/tasks/{task.pk}/requeue")
    assert response.status_code == 201
    body = response.json()
    assert body["id"] != task.pk and body["status"] == "pending" and body["priority"] == "low"
    assert body["text"] == "flaky"
    again = api_client.post(f"/api/v1/tasks/{body['id']}/requeue")
    assert again.status_code == 409
    assert api_client.post("/api/v1/tasks/999999/requeue").status_code == 404


def test_filter_by_stop_reason(api_client, ops):
    task = task_enqueue(team=ops, text="x")
    task_cancel(task_id=task.pk)
    items = api_client.get("/api/v1/tasks?stop_reason=cancelled").json()["items"]
    assert [i["id"] for i in items] == [task.pk]

"""/api/v1/tasks/{id}: the question a task waits on, and answering or deciding it."""

from __future__ import annotations

import pytest

from tasks.models import Task, UserQuestion
from tests.factories import TaskFactory, TeamFactory

pytestmark = pytest.mark.django_db


def _waiting(main_team, kind: str = "question", **fields) -> Task:
    ops = TeamFactory(name="ops", parent=main_team)
    status = "waiting_for_user" if kind == "question" else "waiting_for_approval"
    task = TaskFactory(team=ops, text="Check the disk", status=status)
    UserQuestion.objects.create(task=task, team=ops, kind=kind, **fields)
    return task


def test_the_detail_shows_the_pending_question(api_client, main_team):
    task = _waiting(main_team, text="Which disk?", options=["sda", "sdb"])
    body = api_client.get(f"/api/v1/tasks/{task.pk}").json()
    assert body["status"] == "waiting_for_user"
    assert body["waiting"]["text"] == "Which disk?"
    assert body["waiting"]["options"] == ["sda", "sdb"] and body["waiting"]["kind"] == "question"
    assert [q["state"] for q in body["questions"]] == ["pending"]


def test_tasks_can_be_listed_by_waiting_status(api_client, main_team):
    task = _waiting(main_team, text="Which disk?")
    items = api_client.get("/api/v1/tasks?status=waiting_for_user").json()["items"]
    assert [t["id"] for t in items] == [task.pk]


def test_an_answer_puts_the_task_back_in_the_queue(api_client, main_team):
    task = _waiting(main_team, text="Which disk?", options=["sda", "sdb"])
    response = api_client.post(
        f"/api/v1/tasks/{task.pk}/answer", {"answer": "sdb"}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "pending" and body["waiting"] is None
    assert body["questions"][0]["answer"] == "sdb"
    assert body["questions"][0]["decided_by"] == "operator"
    assert body["questions"][0]["decided_via"] == "api"


@pytest.mark.parametrize(
    "payload, status, fragment",
    [
        ({"answer": ""}, 400, "must not be empty"),
        ({"answer": "sdc"}, 400, "one of: sda, sdb"),
        ({}, 422, "answer"),
        ({"answer": 5}, 422, "answer"),
    ],
)
def test_bad_answers_get_a_detail_and_change_nothing(
    api_client, main_team, payload, status, fragment
):
    task = _waiting(main_team, text="Which disk?", options=["sda", "sdb"])
    response = api_client.post(
        f"/api/v1/tasks/{task.pk}/answer", payload, content_type="application/json"
    )
    assert response.status_code == status, response.content
    assert fragment in str(response.json()["detail"])
    assert Task.objects.get(pk=task.pk).status == "waiting_for_user"


def test_answering_a_task_that_does_not_wait_is_a_conflict(api_client, main_team):
    ops = TeamFactory(name="ops", parent=main_team)
    task = TaskFactory(team=ops, status="running")
    response = api_client.post(
        f"/api/v1/tasks/{task.pk}/answer", {"answer": "x"}, content_type="application/json"
    )
    assert response.status_code == 409 and "not waiting" in response.json()["detail"]
    missing = api_client.post(
        "/api/v1/tasks/999999/answer", {"answer": "x"}, content_type="application/json"
    )
    assert missing.status_code == 404


def test_an_approval_decision_is_recorded_with_its_reason(api_client, main_team):
    task = _waiting(main_team, kind="approval", tool="bash", arguments={"command": "reboot"})
    response = api_client.post(
        f"/api/v1/tasks/{task.pk}/approval",
        {"decision": "deny", "reason": "not during office hours"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    question = response.json()["questions"][0]
    assert question["state"] == "denied" and question["reason"] == "not during office hours"
    assert Task.objects.get(pk=task.pk).status == "pending"


def test_a_bad_decision_is_422_and_an_answer_to_an_approval_is_a_conflict(api_client, main_team):
    task = _waiting(main_team, kind="approval", tool="bash")
    bad = api_client.post(
        f"/api/v1/tasks/{task.pk}/approval", {"decision": "maybe"}, content_type="application/json"
    )
    assert bad.status_code == 422
    wrong = api_client.post(
        f"/api/v1/tasks/{task.pk}/answer", {"answer": "yes"}, content_type="application/json"
    )
    assert wrong.status_code == 409 and "approval" in wrong.json()["detail"]
    assert UserQuestion.objects.get(task=task).state == "pending"

"""Tasks waiting for a person in the back office: the dashboard card, the answer forms and the
read-only audit of decisions."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tasks.models import Task, UserQuestion
from tests.factories import TaskFactory, TeamFactory

pytestmark = pytest.mark.django_db


def _waiting(main_team, kind: str = "question", **fields) -> UserQuestion:
    ops = TeamFactory(name="ops", parent=main_team)
    status = "waiting_for_user" if kind == "question" else "waiting_for_approval"
    task = TaskFactory(team=ops, text="Check the disk", status=status)
    return UserQuestion.objects.create(task=task, team=ops, kind=kind, **fields)


def test_the_dashboard_lists_waiting_tasks_with_an_answer_form(admin_client, main_team):
    question = _waiting(main_team, text="Which disk?", options=["sda", "sdb"])
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert "Waiting for a person" in page and "Which disk?" in page
    assert f'id="answer-{question.pk}"' in page and '<option value="sdb">' in page


def test_the_task_page_shows_the_question_and_its_form(admin_client, main_team):
    question = _waiting(main_team, kind="approval", tool="bash", arguments={"command": "ls"})
    url = reverse("admin:tasks_task_change", args=[question.task_id])
    page = admin_client.get(url).content.decode()
    assert 'id="task-questions"' in page and "bash" in page and ">Approve</button>" in page


def test_answering_from_the_admin_resumes_the_task_and_is_audited(admin_client, main_team):
    question = _waiting(main_team, text="Which disk?", options=["sda", "sdb"])
    url = reverse("admin:tasks_userquestion_decide", args=[question.pk])
    response = admin_client.post(url, {"decision": "answer", "answer": "sda"})
    assert response.status_code == 302
    question.refresh_from_db()
    assert question.state == "answered" and question.answer == "sda"
    assert question.decided_by == "admin:admin" and question.decided_via == "admin"
    assert Task.objects.get(pk=question.task_id).status == "pending"


def test_a_refused_answer_is_a_message_and_changes_nothing(admin_client, main_team):
    question = _waiting(main_team, text="Which disk?", options=["sda", "sdb"])
    url = reverse("admin:tasks_userquestion_decide", args=[question.pk])
    response = admin_client.post(url, {"decision": "answer", "answer": "sdz"}, follow=True)
    assert "one of: sda, sdb" in response.content.decode()
    question.refresh_from_db()
    assert question.state == "pending"


def test_an_operator_denies_from_the_admin(admin_client, main_team):
    question = _waiting(main_team, kind="approval", tool="bash")
    url = reverse("admin:tasks_userquestion_decide", args=[question.pk])
    admin_client.post(url, {"decision": "deny", "reason": "no"})
    question.refresh_from_db()
    assert (question.state, question.reason) == ("denied", "no")


def test_decisions_are_read_only_history(admin_client, main_team):
    question = _waiting(main_team, text="Which disk?")
    change = reverse("admin:tasks_userquestion_change", args=[question.pk])
    assert admin_client.get(change).status_code == 200
    assert admin_client.post(change, {"answer": "x"}).status_code == 403
    delete = reverse("admin:tasks_userquestion_delete", args=[question.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert (
        admin_client.get(reverse("admin:tasks_userquestion_decide", args=[question.pk])).status_code
        == 405
    )

"""A secret value stored in the vault never leaves through the API, wherever it was quoted."""

import pytest

from tests.api.factories import SessionFactory
from tests.factories import TaskFactory, TeamFactory
from vault.services import vault_store_secret

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-Value-9f8e7d6c"


@pytest.fixture
def leaky_task(main_team):
    ops = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=ops, key="DB_PASSWORD", value=SECRET, updated_by="tests")
    task = TaskFactory(
        team=ops,
        text=f"connect with password {SECRET} please",
        result=f"done; used {SECRET}",
        status="done",
    )
    SessionFactory(team=ops, task=task)
    return task


def test_secret_never_appears_in_tasks_list(api_client, leaky_task):
    response = api_client.get("/api/v1/tasks")
    assert response.status_code == 200
    assert SECRET not in response.content.decode()
    item = response.json()["items"][0]
    assert item["text"] == "connect with password [REDACTED] please"
    assert item["result"] == "done; used [REDACTED]"


def test_secret_never_appears_in_task_detail(api_client, leaky_task):
    response = api_client.get(f"/api/v1/tasks/{leaky_task.pk}")
    assert response.status_code == 200
    assert SECRET not in response.content.decode()
    assert "[REDACTED]" in response.json()["text"]


def test_secret_never_appears_in_cancel_response(api_client, leaky_task):
    leaky_task.status = "pending"
    leaky_task.save()
    response = api_client.post(f"/api/v1/tasks/{leaky_task.pk}/cancel")
    assert response.status_code == 200
    assert SECRET not in response.content.decode()


def test_secret_shaped_strings_are_redacted_even_unknown_to_the_vault(api_client, main_team):
    TaskFactory(team=main_team, text="use key sk-abcdefghijklmnopqrstuvwxyz123456")
    body = api_client.get("/api/v1/tasks").content.decode()
    assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in body

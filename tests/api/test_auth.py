"""Who may call the API: a valid bearer token, or a staff user's session (with CSRF on writes)."""

import pytest
from django.test import Client

from tests.api.factories import UserFactory
from tests.factories import TaskFactory
from trust.models import ApiToken
from trust.services import api_token_create, api_token_revoke

pytestmark = pytest.mark.django_db

CSRF = "a" * 32  # any 32 alphanumerics form a valid CSRF secret


def test_tasks_list_without_token_is_401():
    response = Client().get("/api/v1/tasks")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert "Authorization: Bearer <token>" in response.json()["detail"]
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    ["Bearer ohk_not-a-real-token", "Bearer ", "Bearer", "Basic dXNlcjpwdw==", "ohk_x", "Bearer é"],
)
def test_teams_list_with_invalid_authorization_is_401(header):
    response = Client(HTTP_AUTHORIZATION=header).get("/api/v1/teams")
    assert response.status_code == 401
    assert "detail" in response.json()


def test_a_401_says_why_the_credential_did_not_count_without_echoing_it():
    unknown = Client(HTTP_AUTHORIZATION="Bearer ohk_not-a-real-token").get("/api/v1/teams")
    assert unknown.json()["code"] == "invalid_token" and "ohk_not" not in unknown.content.decode()
    wrong_scheme = Client(HTTP_AUTHORIZATION="Token ohk_x").get("/api/v1/teams")
    assert wrong_scheme.json()["code"] == "bad_authorization_header"
    assert "Authorization: Bearer <token>" in wrong_scheme.json()["detail"]


def test_revoked_token_is_401(api_token, api_client):
    assert api_client.get("/api/v1/teams").status_code == 200
    api_token_revoke(token_id=ApiToken.objects.get().pk)
    assert api_client.get("/api/v1/teams").status_code == 401


def test_token_of_inactive_user_is_401():
    UserFactory(username="gone", is_active=False)
    _, token = api_token_create(username="gone")
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/v1/teams")
    assert response.status_code == 401


def test_valid_token_is_accepted_and_marks_last_use(api_client):
    response = api_client.get("/api/v1/tasks")
    assert response.status_code == 200
    assert ApiToken.objects.get().last_used_at is not None


def test_staff_session_is_accepted():
    client = Client()
    client.force_login(UserFactory(is_staff=True))
    assert client.get("/api/v1/teams").status_code == 200


def test_non_staff_session_is_401():
    client = Client()
    client.force_login(UserFactory(is_staff=False))
    assert client.get("/api/v1/teams").status_code == 401


def test_staff_session_write_without_csrf_token_is_403():
    task = TaskFactory()
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(is_staff=True))
    response = client.post(f"/api/v1/tasks/{task.pk}/cancel")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    task.refresh_from_db()
    assert task.status == "pending"


def test_staff_session_write_with_csrf_token_is_accepted():
    task = TaskFactory()
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(is_staff=True))
    client.cookies["csrftoken"] = CSRF
    response = client.post(f"/api/v1/tasks/{task.pk}/cancel", HTTP_X_CSRFTOKEN=CSRF)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"


def test_token_write_needs_no_csrf_token(api_token):
    task = TaskFactory()
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {api_token}")
    response = client.post(f"/api/v1/tasks/{task.pk}/cancel")
    assert response.status_code == 200


def test_write_without_any_credentials_is_401_not_a_csrf_error():
    task = TaskFactory()
    response = Client(enforce_csrf_checks=True).post(f"/api/v1/tasks/{task.pk}/cancel")
    assert response.status_code == 401

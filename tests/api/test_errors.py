"""The error contract: every 4xx is JSON {"detail": ...}; domain errors map to their status."""

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from openhive.core.errors import Conflict, DomainError, NotAllowed, NotFound
from tests.api.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    ["/api/v1/", "/api/v1/nope", "/api/v1/teams/", "/api/v1/teams/ops/extra", "/api/v1/%C3%A9"],
)
def test_unknown_api_path_is_404_json(api_client, path):
    response = api_client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert "detail" in response.json()


def test_unknown_api_path_is_404_even_without_credentials():
    assert Client().get("/api/v1/nope").status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [("put", "/api/v1/teams"), ("delete", "/api/v1/tasks"), ("get", "/api/v1/tasks/1/cancel")],
)
def test_wrong_method_is_405_json(api_client, method, path):
    response = getattr(api_client, method)(path)
    assert response.status_code == 405
    assert "Method not allowed" in response.json()["detail"]
    assert response["Allow"]


def test_docs_and_openapi_schema_are_served_to_api_users(api_client):
    assert api_client.get("/api/v1/docs").status_code == 200
    schema = api_client.get("/api/v1/openapi.json").json()
    paths = set(schema["paths"])
    assert {"/api/v1/health", "/api/v1/teams", "/api/v1/teams/tree", "/api/v1/tasks"} <= paths
    assert "/api/v1/{path}" not in paths


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (NotFound("gone"), 404),
        (Conflict("taken"), 409),
        (NotAllowed("no"), 403),
        (DomainError("bad", code="invalid_thing"), 400),
    ],
)
def test_domain_errors_map_to_their_status(api_client, monkeypatch, error, status):
    def raise_error(**kwargs):
        raise error

    monkeypatch.setattr("tasks.api.task_list", raise_error)
    response = api_client.get("/api/v1/tasks")
    assert response.status_code == status
    assert response.json() == {"detail": error.message, "code": error.code}


def test_openapi_schema_without_credentials_is_401():
    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert "Authorization: Bearer <token>" in response.json()["detail"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_docs_page_sends_a_browser_without_session_to_the_admin_login():
    response = Client().get("/api/v1/docs", HTTP_ACCEPT="text/html,*/*")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=/api/v1/docs")


def test_docs_page_is_served_to_a_staff_session_with_this_servers_own_swagger_files():
    client = Client()
    client.force_login(UserFactory(is_staff=True))
    response = client.get("/api/v1/docs", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    page = response.content.decode()
    # No CDN: the page works on a machine without internet, from files this server has.
    assert "cdn" not in page.lower() and "https://" not in page
    for name in ("ninja/swagger-ui.css", "ninja/swagger-ui-bundle.js", "ninja/swagger-ui-init.js"):
        assert f"/static/{name}" in page
        assert finders.find(name), name


def test_docs_refuse_writes_with_json():
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(is_staff=True))
    for path in ("/api/v1/docs", "/api/v1/openapi.json"):
        response = client.post(path)
        assert response.status_code == 405
        assert response.json()["detail"].startswith("Method not allowed")

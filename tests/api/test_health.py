import pytest
from django.db import OperationalError
from django.test import Client

from teams.models import Team

pytestmark = pytest.mark.django_db


def test_health_is_open_and_reports_ok_without_provider():
    response = Client().get("/api/v1/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "provider_configured": False,
        "memory_search": "hybrid",
        "config_problems": [],
        "version": "0.1.0",
    }


def test_health_reports_a_configured_provider(scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    assert Client().get("/api/v1/health").json()["provider_configured"] is True


def test_health_with_a_failing_database_is_503_without_details(monkeypatch):
    def broken() -> bool:
        raise OperationalError("could not connect to server: password=hunter2")

    monkeypatch.setattr(Team.objects, "count", broken)
    response = Client().get("/api/v1/health")
    assert response.status_code == 503
    assert response.json()["status"] == "error"
    assert response.json()["database"] == "error"
    assert "hunter2" not in response.content.decode()


def test_health_with_an_unreadable_provider_file_is_still_answered(openhive_dirs):
    (openhive_dirs / "data" / "config" / "providers.yaml").write_text("profiles: [unclosed")
    response = Client().get("/api/v1/health")
    assert response.status_code == 200
    assert response.json()["provider_configured"] is False


def test_health_names_a_profile_whose_key_variable_is_unset(openhive_dirs, monkeypatch):
    monkeypatch.delenv("ZZ_HEALTH_KEY", raising=False)
    (openhive_dirs / "data" / "config" / "providers.yaml").write_text(
        "profiles:\n  default: {model: openai/x, api_key_env: ZZ_HEALTH_KEY}\n"
    )
    body = Client().get("/api/v1/health").json()
    assert body["provider_configured"] is False
    assert body["config_problems"] == [
        'providers.yaml: profile "default": api_key_env names $ZZ_HEALTH_KEY, which is not set '
        "in the environment of the server (set it where serve runs, or write the key as api_key)"
    ]

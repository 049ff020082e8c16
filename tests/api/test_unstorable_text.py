"""Text no database stores (a NUL, a lone surrogate) is refused with a JSON 400 at every
operation, in the path, the query and the body, the same on SQLite and PostgreSQL (which
answered 13 routes with an HTML 500), and nothing is written."""

from __future__ import annotations

import json

import pytest
from django.apps import apps

from openhive.api import api
from tests.api.factories import TriggerConfigFactory
from tests.factories import TaskFactory, TeamFactory

pytestmark = pytest.mark.django_db

BAD = {"nul": "\x00", "lone surrogate": "\ud800"}


@pytest.fixture
def world(main_team) -> dict:
    ops = TeamFactory(name="ops", parent=main_team)
    task = TaskFactory(team=ops)
    TriggerConfigFactory(team=ops, name="daily")
    return {"task_id": task.pk, "session_id": 1, "topic_id": 1, "memory_id": 1}


def operations() -> list[tuple[str, str, dict]]:
    schema = api.get_openapi_schema()
    return [
        (method, path, op)
        for path, methods in schema["paths"].items()
        for method, op in methods.items()
        if path != "/api/v1/health"
    ]


def fill(path: str, world: dict, text_param: str | None = None, text: str = "") -> str:
    for name in ("name", "team", "key"):
        value = "ops" if name != "name" or "/triggers/" not in path else "daily"
        path = path.replace("{" + name + "}", (value + text) if name == text_param else value)
    for name, value in world.items():
        path = path.replace("{" + name + "}", str(value))
    return path


def counts() -> dict[str, int]:
    return {m._meta.label: m._default_manager.count() for m in apps.get_models()}


def _string_fields(operation: dict) -> list[str]:
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    ref = body.get("schema", {}).get("$ref", "")
    if not ref:
        return []
    component = api.get_openapi_schema()["components"]["schemas"][ref.split("/")[-1]]
    return [
        name
        for name, prop in component.get("properties", {}).items()
        if prop.get("type") == "string"
    ]


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_bad_text_in_any_json_body_is_a_400_and_changes_nothing(api_client, world, bad):
    before = counts()
    checked = 0
    for method, path, operation in operations():
        fields = _string_fields(operation)
        if method == "get" or not fields:
            continue
        body = {field: f"x{bad}y" for field in fields}
        body["config"] = {"cron": f"0 9 * * *{bad}"}
        response = getattr(api_client, method)(
            fill(path, world), json.dumps(body), content_type="application/json"
        )
        assert response.status_code == 400, (method, path, response.content)
        assert response.json()["code"] == "invalid_text", (method, path)
        assert "send plain text" in response.json()["detail"]
        checked += 1
    assert checked >= 6
    assert counts() == before


def test_a_nul_in_any_path_parameter_is_a_400(api_client, world):
    checked = 0
    for method, path, _ in operations():
        for param in ("name", "team", "key"):
            if "{" + param + "}" not in path:
                continue
            url = fill(path, world, param, "%00")
            if method == "get":
                response = api_client.get(url)
            else:
                response = getattr(api_client, method)(url, "{}", content_type="application/json")
            assert response.status_code == 400, (method, url, response.content)
            assert "NUL" in response.json()["detail"]
            checked += 1
    assert checked >= 15


def test_a_nul_in_any_query_parameter_is_a_400(api_client, world):
    checked = 0
    for method, path, operation in operations():
        for param in operation.get("parameters", []):
            if param["in"] != "query":
                continue
            response = getattr(api_client, method)(
                fill(path, world) + f"?{param['name']}=a%00b", content_type="application/json"
            )
            assert response.status_code == 400, (method, path, param["name"], response.content)
            assert response.json()["code"] == "invalid_text"
            checked += 1
    assert checked >= 20


def test_a_body_nested_too_deeply_is_a_400(api_client, world):
    for depth in (150, 50_000):
        body = "[" * depth + "]" * depth
        response = api_client.post("/api/v1/tasks", body, content_type="application/json")
        assert response.status_code == 400 and "nested" in response.json()["detail"]

"""The OpenAPI schema says what the API really answers: the 4xx answers of every operation with
one error shape, and each enum under its own name (a task's `type` is not a trigger's)."""

from __future__ import annotations

import pytest
from ninja import Schema

from openhive.api import api
from tasks.models import Task
from triggers.models import TriggerConfig

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema() -> dict:
    return api.get_openapi_schema()


def _operations(schema: dict):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield method, path, operation


def test_every_authenticated_operation_documents_its_4xx_answers(schema):
    for method, path, operation in _operations(schema):
        responses = {int(code) for code in operation["responses"]}
        if path == "/api/v1/health":
            assert responses == {200, 503}
            continue
        expected = {400, 401, 404}
        expected |= set() if path.startswith("/api/v1/topics") else {403}
        expected |= {409} if method != "get" else set()
        expected |= {422} if operation.get("parameters") or operation.get("requestBody") else set()
        assert expected <= responses, (method, path, responses)
        for code in expected:
            answer = operation["responses"][code]
            assert answer["description"]
            ref = answer["content"]["application/json"]["schema"]["$ref"]
            # An operation may answer a status with a body of its own (a 409 that lists what
            # is in flight); every other 4xx is the common error.
            own = (method, path, code) == ("post", "/api/v1/tasks", 409)
            assert ref == "#/components/schemas/Error" or own, (method, path, code)
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["detail"]


def _param(schema: dict, method: str, path: str, name: str) -> dict:
    params = schema["paths"][path][method]["parameters"]
    return next(p for p in params if p["name"] == name)["schema"]


def _enum(node: dict, schema: dict) -> list[str]:
    for option in node.get("anyOf", [node]):
        if "$ref" in option:
            option = schema["components"]["schemas"][option["$ref"].split("/")[-1]]
        if "enum" in option:
            return option["enum"]
    raise AssertionError(f"no enum in {node}")


def test_task_filters_document_the_task_enums_not_the_trigger_ones(schema):
    assert _enum(_param(schema, "get", "/api/v1/tasks", "type"), schema) == Task.Type.values
    assert _enum(_param(schema, "get", "/api/v1/tasks", "status"), schema) == Task.Status.values
    trigger_in = schema["components"]["schemas"]["TriggerIn"]["properties"]["type"]
    assert _enum(trigger_in, schema) == TriggerConfig.Type.values
    state = _param(schema, "get", "/api/v1/triggers", "state")
    assert _enum(state, schema) == TriggerConfig.State.values


def _our_schemas() -> list[type[Schema]]:
    found, stack = [], list(Schema.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] in {
            "openhive",
            "tasks",
            "teams",
            "triggers",
            "trust",
            "vault",
            "memory",
        }:
            found.append(cls)
    return found


def test_no_two_models_or_enums_share_a_component_name(schema):
    components = schema["components"]["schemas"]
    checked = 0
    for model in _our_schemas():
        defs = model.model_json_schema(ref_template="#/components/schemas/{model}").get("$defs", {})
        for name, definition in defs.items():
            if name not in components:
                continue
            merged = components[name]
            # The same enum values, or the same fields: otherwise two classes share the name.
            assert merged.get("enum") == definition.get("enum"), (model, name)
            assert set(merged.get("properties", {})) == set(definition.get("properties", {})), (
                model,
                name,
            )
            checked += 1
    assert checked >= 5

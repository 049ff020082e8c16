"""The tool registry: declaration, portable schemas for every registered tool, glob allowlists."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Literal

import pytest
from openai.types.chat import ChatCompletionToolParam
from pydantic import BaseModel, ConfigDict, Field, HttpUrl, TypeAdapter

from openhive.core import registry
from openhive.core.registry import is_allowed, portable_schema, tool, tools_for

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


# --- a checker for the portability rules, used on every registered tool ---------------------


def portability_problems(schema: Any, where: str = "$") -> list[str]:
    """Every way `schema` breaks the portable-schema rules (empty when it is portable)."""
    problems: list[str] = []
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            problems += portability_problems(item, f"{where}[{i}]")
        return problems
    if not isinstance(schema, dict):
        return problems
    for keyword in ("$ref", "$defs", "definitions", "format"):
        if keyword in schema:
            problems.append(f"{where}: uses {keyword!r}")
    is_object = schema.get("type") == "object" or "properties" in schema
    if is_object:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{where}: object without additionalProperties: false")
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        for prop in properties:
            if prop not in required:
                problems.append(f"{where}.{prop}: not listed in required")
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            for prop, sub in value.items():
                problems += portability_problems(sub, f"{where}.{prop}")
        elif isinstance(value, (dict, list)):
            problems += portability_problems(value, f"{where}.{key}")
    return problems


def is_nullable(schema: dict) -> bool:
    if schema.get("type") == "null" or (
        isinstance(schema.get("type"), list) and "null" in schema["type"]
    ):
        return True
    return any(is_nullable(v) for v in schema.get("anyOf", []) if isinstance(v, dict))


def optional_fields_not_nullable(model: type[BaseModel], schema: dict) -> list[str]:
    """Properties the pydantic model does not require must accept null in the portable schema."""
    return [
        name
        for name, field in model.model_fields.items()
        if not field.is_required()
        and not is_nullable(schema["properties"].get(field.alias or name, {}))
    ]


def test_registry_holds_the_core_tools():
    names = {spec.name for spec in registry.all_tools()}
    assert {"spawn_team", "list_teams", "delegate_task"} <= names


def test_all_tools_are_sorted_by_name():
    names = [spec.name for spec in registry.all_tools()]
    assert names == sorted(names)


@pytest.mark.parametrize("spec", registry.all_tools(), ids=lambda s: s.name)
def test_every_registered_tool_has_a_portable_schema(spec):
    declaration = spec.function_schema()
    parameters = declaration["function"]["parameters"]

    assert OPENAI_NAME.fullmatch(spec.name), f"{spec.name}: not a valid function name"
    assert spec.description.strip(), f"{spec.name}: tool has no description"
    assert spec.ops in ("daily", "org")
    assert parameters.get("type") == "object"
    assert portability_problems(parameters) == []
    assert optional_fields_not_nullable(spec.args, parameters) == []
    # Plain JSON, and accepted as an OpenAI/litellm function declaration.
    assert json.loads(json.dumps(declaration)) == declaration
    TypeAdapter(ChatCompletionToolParam).validate_python(declaration)


# --- portable_schema itself -------------------------------------------------------------------


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(description="A heading")
    link: HttpUrl | None = None


class _Awkward(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(description="A property called title is an ordinary argument")
    inner: _Inner = Field(description="A nested model")
    maybe: _Inner | None = None
    many: list[_Inner] = Field(default_factory=list)
    url: HttpUrl
    when: datetime | None = None
    level: Literal["a", "b"] = "a"
    count: int = Field(default=3, description="How many")


def test_portable_schema_inlines_refs_drops_formats_and_keeps_every_property():
    schema = portable_schema(_Awkward)

    assert portability_problems(schema) == []
    assert optional_fields_not_nullable(_Awkward, schema) == []
    assert list(schema["properties"]) == [
        "title",
        "inner",
        "maybe",
        "many",
        "url",
        "when",
        "level",
        "count",
    ]
    assert schema["required"] == list(schema["properties"])
    # A property that happens to be named "title" is kept, at every depth.
    assert schema["properties"]["title"] == {
        "description": "A property called title is an ordinary argument",
        "type": "string",
    }
    assert "title" in schema["properties"]["inner"]["properties"]
    assert schema["properties"]["inner"]["required"] == ["title", "link"]


def test_portable_schema_keeps_the_description_next_to_a_reference():
    schema = portable_schema(_Awkward)
    assert schema["properties"]["inner"]["description"] == "A nested model"


def test_portable_schema_makes_optional_properties_nullable_without_defaults():
    schema = portable_schema(_Awkward)
    count = schema["properties"]["count"]
    assert count["description"] == "How many"
    assert {"type": "null"} in count["anyOf"]
    assert "default" not in json.dumps(schema)
    assert not is_nullable(schema["properties"]["url"])


def test_checker_flags_an_open_ended_dict():
    class Loose(BaseModel):
        model_config = ConfigDict(extra="forbid")

        labels: dict[str, str]

    problems = portability_problems(portable_schema(Loose))
    assert any("labels" in p and "additionalProperties" in p for p in problems)


def test_checker_flags_a_property_missing_from_required_and_refs():
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"type": "string", "format": "uri"}},
        "required": ["a"],
    }
    problems = portability_problems(schema)
    assert any("'$ref'" in p for p in problems)
    assert any("'format'" in p for p in problems)
    assert any(".b: not listed in required" in p for p in problems)


# --- declaring tools ------------------------------------------------------------------------


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


@pytest.fixture
def temporary_tools():
    """Names registered during the test are removed from the registry afterwards."""
    before = set(registry._REGISTRY)
    yield
    for name in set(registry._REGISTRY) - before:
        del registry._REGISTRY[name]


def test_decorator_registers_a_tool(temporary_tools):
    @tool(name="zz_test_echo", description="Echo for tests", args=_NoArgs, ops="org")
    def echo(ctx, args):
        return {"echo": True}

    spec = registry.get_tool("zz_test_echo")
    assert spec is not None
    assert spec.func is echo and spec.ops == "org" and spec.args is _NoArgs
    assert spec.function_schema()["function"]["name"] == "zz_test_echo"


def test_declaring_two_different_functions_under_one_name_is_refused(temporary_tools):
    @tool(name="zz_test_twice", description="first", args=_NoArgs)
    def first(ctx, args):
        return {}

    with pytest.raises(RuntimeError, match="declared twice"):

        @tool(name="zz_test_twice", description="second", args=_NoArgs)
        def second(ctx, args):
            return {}

    assert registry.get_tool("zz_test_twice").func is first


def test_unknown_tool_is_not_found():
    assert registry.get_tool("no_such_tool") is None


# --- allowlists -----------------------------------------------------------------------------


def test_star_allows_every_tool():
    assert all(is_allowed(spec.name, ["*"]) for spec in registry.all_tools())
    assert [s.name for s in tools_for(["*"])] == [s.name for s in registry.all_tools()]


def test_prefix_glob_allows_only_matching_names():
    assert is_allowed("browser_open", ["browser_*"])
    assert is_allowed("browser_", ["browser_*"])
    assert not is_allowed("web_browser_open", ["browser_*"])
    assert not is_allowed("browser", ["browser_*"])


def test_exact_name_allows_only_that_tool():
    assert is_allowed("list_teams", ["list_teams"])
    assert not is_allowed("list_teams_all", ["list_teams"])
    assert [s.name for s in tools_for(["list_teams"])] == ["list_teams"]


def test_plain_and_glob_patterns_agree_with_fnmatch_on_every_tool():
    from fnmatch import fnmatchcase

    names = [spec.name for spec in registry.all_tools()] + ["list_teams ", " list_teams", ""]
    patterns = ["list_teams", "list_team", "list_?eams", "list_[st]eams", "[!x]*", "*", ""]
    for pattern in patterns:
        for name in names:
            assert is_allowed(name, [pattern]) is fnmatchcase(name, pattern), (pattern, name)


def test_globs_are_case_sensitive():
    assert not is_allowed("spawn_team", ["Spawn_team"])
    assert not is_allowed("spawn_team", ["SPAWN_*"])
    assert "spawn_team" not in [s.name for s in tools_for(["Spawn_team"])]


def test_empty_allowlist_denies_everything():
    assert not is_allowed("list_teams", [])
    assert tools_for([]) == []


def test_several_patterns_are_a_union():
    names = [s.name for s in tools_for(["list_teams", "spawn_*"])]
    assert names == ["list_teams", "spawn_team"]


def test_tools_for_only_narrows_but_never_widens():
    assert [s.name for s in tools_for(["*"], only=["list_teams"])] == ["list_teams"]
    assert tools_for(["spawn_team"], only=["list_teams"]) == []

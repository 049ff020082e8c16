"""An MCP server's tool schema made portable (the same rules as our own tools), server
definitions checked when the config is read, and tool names every provider accepts."""

from __future__ import annotations

import pytest

from openhive.core.errors import DomainError
from openhive.core.registry import portable_json_schema
from openhive.tools.mcpclient.source import _may_allow, tool_name
from teams.config import load_team_config

from .conftest import set_config

SERVER_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "title": "Args",
    "properties": {
        "url": {"type": "string", "format": "uri", "title": "Url"},
        "limit": {"type": "integer", "default": 10, "description": "How many"},
        "filter": {"$ref": "#/$defs/Filter"},
        "tree": {"$ref": "#/definitions/Node"},
    },
    "required": ["url"],
    "$defs": {
        "Filter": {
            "type": "object",
            "properties": {"tag": {"type": "string"}, "title": {"type": "string"}},
        }
    },
    "definitions": {
        "Node": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}},
        }
    },
}


def test_a_server_schema_becomes_portable():
    schema = portable_json_schema(SERVER_SCHEMA)
    assert "$schema" not in schema and "title" not in schema and "$defs" not in schema
    assert schema["required"] == ["url", "limit", "filter", "tree"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["url"] == {"type": "string"}
    limit = schema["properties"]["limit"]
    assert limit == {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "How many"}
    nested = schema["properties"]["filter"]["anyOf"][0]
    # A property named "title" is data, not the keyword.
    assert set(nested["properties"]) == {"tag", "title"} and nested["additionalProperties"] is False
    assert '"$ref"' not in str(schema).replace("'", '"')


def test_a_self_referencing_schema_is_cut_off_finitely():
    schema = portable_json_schema(SERVER_SCHEMA)
    # Each level names "children" twice (property, required); the expansion stops at a depth.
    assert 2 <= str(schema).count("children") <= 20


@pytest.mark.parametrize("given", [None, {}, {"type": "string"}, {"type": "object"}])
def test_a_missing_or_odd_schema_is_an_empty_object(given):
    assert portable_json_schema(given) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_tool_names_are_valid_for_every_provider():
    assert tool_name("git", "git_log") == "mcp__git__git_log"
    assert tool_name("web", "fetch.page/v2") == "mcp__web__fetch_page_v2"
    assert len(tool_name("a" * 20, "b" * 100)) == 64


def test_a_server_is_started_only_when_the_allowlist_could_admit_its_tools():
    assert _may_allow("git", ["*"]) and _may_allow("git", ["mcp__*"])
    assert _may_allow("git", ["mcp__git__*"]) and _may_allow("git", ["mcp__git__git_log"])
    assert _may_allow("git", ["mcp__g?t__*"])
    assert not _may_allow("git", ["read_file", "mcp__time__*", "plugin__*"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"x": {"command": "a", "url": "http://b"}}, "either command"),
        ({"x": {}}, "either command"),
        ({"x": {"url": "http://b", "env": {"A": "1"}}}, "belong to a stdio server"),
        ({"x": {"command": "a", "headers": {"A": "1"}}}, "belong to an HTTP server"),
        ({"bad__name": {"command": "a"}}, "mcp_servers.bad__name"),
        ({"x": {"command": "a", "comand": "typo"}}, "comand"),
    ],
)
def test_a_wrong_server_definition_is_a_config_error_naming_it(ops, servers, message):
    set_config("ops", mcp_servers=servers)
    with pytest.raises(DomainError, match=message):
        load_team_config("ops")


@pytest.mark.django_db
def test_health_names_a_broken_operator_file_and_a_dangling_reference(ops, openhive_dirs):
    from django.test import Client

    config = openhive_dirs / "data" / "config" / "mcp_servers.yaml"
    config.write_text("servers:\n  shared-time: {comand: mcp-server-time}\n")
    problems = Client().get("/api/v1/health").json()["config_problems"]
    assert any("config/mcp_servers.yaml" in p and "comand" in p for p in problems), problems
    config.write_text("servers:\n  shared-time: {command: mcp-server-time}\n")
    set_config("ops", mcp_servers={"clock": "shared-tme"})
    problems = Client().get("/api/v1/health").json()["config_problems"]
    assert problems == [
        'team "ops": mcp_servers.clock: no server "shared-tme" in config/mcp_servers.yaml '
        "(defined there: shared-time)"
    ]
    assert str(openhive_dirs) not in str(problems)


def test_a_chatty_servers_stderr_is_trimmed_to_its_tail():
    import os

    from openhive.tools.mcpclient.connection import STDERR_KEEP_BYTES, Connection
    from openhive.tools.mcpclient.servers import ServerPlan
    from teams.config import McpServerConfig

    plan = ServerPlan(team_id=1, team_name="ops", name="fx", config=McpServerConfig(command="x"))
    conn = Connection(plan, None)
    fd = conn.errlog.fileno()
    os.write(fd, b"noise\n" * (STDERR_KEEP_BYTES // 6 + 10))
    os.write(fd, b"the last words\n")
    conn.trim_stderr()
    assert os.fstat(fd).st_size <= 2000
    os.write(fd, b"and after\n")  # the server keeps appending at the new end
    assert conn.stderr_tail().endswith("the last words\nand after")

"""call_tool: the only door to a tool. It never throws, and every call leaves one audit row."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel, ConfigDict, Field

from openhive.core import registry
from openhive.core.context import ToolContext
from openhive.core.errors import DomainError, NotAllowed
from openhive.core.registry import tool
from openhive.engine.models import ToolCall
from openhive.engine.tool_calls import call_tool

pytestmark = pytest.mark.django_db

SECRET = "zq-very-secret-value-0042"


class AddArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    a: int = Field(description="first")
    b: int = Field(default=1, description="second")


class Cred(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    value: str


class SecretArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = Field(description="free text")
    credentials: list[Cred] = Field(default_factory=list)


@pytest.fixture
def test_tools():
    """Temporary tools, declared through the decorator and removed from the registry after."""
    before = set(registry._REGISTRY)

    @tool(name="zz_add", description="Add two numbers", args=AddArgs)
    def add(ctx, args):
        return {"sum": args.a + args.b}

    @tool(name="zz_refuse", description="Always refused", args=AddArgs)
    def refuse(ctx, args):
        raise NotAllowed("you may not add here", code="NOT_PARENT")

    @tool(name="zz_domain_error", description="Plain domain error", args=AddArgs)
    def domain_error(ctx, args):
        raise DomainError("the numbers do not fit")

    @tool(name="zz_crash", description="Crashes", args=AddArgs)
    def crash(ctx, args):
        raise RuntimeError("boom inside the tool")

    @tool(name="zz_plain_value", description="Returns a non-dict", args=AddArgs)
    def plain_value(ctx, args):
        return 42

    @tool(name="zz_own_failure", description="Reports its own failure", args=AddArgs)
    def own_failure(ctx, args):
        return {"success": False, "error": "nothing to add"}

    @tool(name="zz_dated", description="Returns a datetime", args=AddArgs)
    def dated(ctx, args):
        return {"at": datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)}

    @tool(name="zz_secret_crash", description="Takes a secret, crashes", args=SecretArgs)
    def secret_crash(ctx, args):
        raise RuntimeError("crashed while holding " + args.note)

    @tool(name="zz_secret_echo", description="Takes a secret, echoes the note", args=SecretArgs)
    def secret_echo(ctx, args):
        return {"echo": args.note}

    yield
    for name in set(registry._REGISTRY) - before:
        del registry._REGISTRY[name]


@pytest.fixture
def ctx(main_team):
    return ToolContext(team=main_team)


def only_row() -> ToolCall:
    rows = list(ToolCall.objects.all())
    assert len(rows) == 1, rows
    return rows[0]


def assert_failure_audited(result: dict, *, tool_name: str, code: str | None = None) -> ToolCall:
    assert result["success"] is False
    assert isinstance(result["error"], str) and result["error"].strip()
    if code is not None:
        assert result["code"] == code
    row = only_row()
    assert row.tool == tool_name and row.success is False
    assert row.error == result["error"]
    return row


def test_successful_call_returns_the_result_and_is_audited(ctx, test_tools):
    result = call_tool(ctx, "zz_add", '{"a": 2, "b": 3}')
    assert result == {"sum": 5, "success": True}
    row = only_row()
    assert row.success and row.tool == "zz_add" and row.team_name == "main"
    assert row.team == ctx.team
    assert row.arguments == {"a": 2, "b": 3}
    assert row.result == {"sum": 5, "success": True}
    assert row.error == ""


def test_dict_arguments_are_accepted_as_well_as_json(ctx, test_tools):
    assert call_tool(ctx, "zz_add", {"a": 1, "b": 1})["sum"] == 2


def test_null_for_an_optional_argument_means_its_default(ctx, test_tools):
    assert call_tool(ctx, "zz_add", '{"a": 4, "b": null}')["sum"] == 5


def test_empty_arguments_are_an_empty_object(ctx, test_tools):
    result = call_tool(ctx, "zz_add", "")
    assert_failure_audited(result, tool_name="zz_add", code="INVALID_ARGUMENTS")
    assert "a" in result["error"] and "required" in result["error"].lower()


def test_unknown_tool_returns_failure_and_is_audited(ctx, test_tools):
    result = call_tool(ctx, "no_such_tool", "{}")
    assert_failure_audited(result, tool_name="no_such_tool", code="UNKNOWN_TOOL")
    assert "unknown tool" in result["error"] and "no_such_tool" in result["error"]
    assert "list_teams" in result["error"]  # tells the model what it can use instead


def test_tool_not_allowed_for_the_team_returns_failure_and_is_audited(main_team, test_tools):
    ctx = ToolContext(team=main_team, allowed_tools=["list_*"])
    result = call_tool(ctx, "zz_add", '{"a": 1}')
    assert_failure_audited(result, tool_name="zz_add", code="TOOL_NOT_ALLOWED")
    assert "zz_add" in result["error"] and "main" in result["error"]


def test_unknown_tool_lists_only_the_tools_the_team_may_use(main_team, test_tools):
    ctx = ToolContext(team=main_team, allowed_tools=["list_teams", "zz_add"])
    result = call_tool(ctx, "spawn_teams", "{}")
    assert result["error"] == 'unknown tool "spawn_teams". Available: list_teams, zz_add.'


def test_allowlist_is_case_sensitive_when_calling(main_team, test_tools):
    ctx = ToolContext(team=main_team, allowed_tools=["ZZ_add"])
    result = call_tool(ctx, "zz_add", '{"a": 1}')
    assert_failure_audited(result, tool_name="zz_add", code="TOOL_NOT_ALLOWED")


def test_empty_allowlist_refuses_every_tool(main_team, test_tools):
    ctx = ToolContext(team=main_team, allowed_tools=[])
    result = call_tool(ctx, "list_teams", "{}")
    assert_failure_audited(result, tool_name="list_teams", code="TOOL_NOT_ALLOWED")


def test_invalid_json_returns_failure_and_is_audited(ctx, test_tools):
    result = call_tool(ctx, "zz_add", '{"a": 1,')
    assert_failure_audited(result, tool_name="zz_add", code="INVALID_ARGUMENTS")
    assert "not valid JSON" in result["error"]


@pytest.mark.parametrize("arguments", ["[1, 2]", '"a string"', "3", "null"])
def test_non_object_json_returns_failure_and_is_audited(ctx, test_tools, arguments):
    result = call_tool(ctx, "zz_add", arguments)
    assert_failure_audited(result, tool_name="zz_add", code="INVALID_ARGUMENTS")
    assert "JSON object" in result["error"]


def test_missing_required_argument_returns_failure_and_is_audited(ctx, test_tools):
    result = call_tool(ctx, "zz_add", '{"b": 2}')
    assert_failure_audited(result, tool_name="zz_add", code="INVALID_ARGUMENTS")
    assert "a: Field required" in result["error"]


def test_wrong_type_returns_failure_and_is_audited(ctx, test_tools):
    result = call_tool(ctx, "zz_add", '{"a": "not a number"}')
    assert_failure_audited(result, tool_name="zz_add", code="INVALID_ARGUMENTS")
    assert result["error"].startswith("invalid arguments: a:")


def test_extra_argument_returns_failure_and_is_audited(ctx, test_tools):
    result = call_tool(ctx, "zz_add", '{"a": 1, "c": 9}')
    assert_failure_audited(result, tool_name="zz_add", code="INVALID_ARGUMENTS")
    assert "c: Extra inputs are not permitted" in result["error"]


def test_domain_error_keeps_its_message_and_code(ctx, test_tools):
    result = call_tool(ctx, "zz_refuse", '{"a": 1}')
    assert_failure_audited(result, tool_name="zz_refuse", code="NOT_PARENT")
    assert result["error"] == "you may not add here"


def test_domain_error_without_code_is_reported_as_invalid(ctx, test_tools):
    result = call_tool(ctx, "zz_domain_error", '{"a": 1}')
    assert_failure_audited(result, tool_name="zz_domain_error", code="INVALID")
    assert result["error"] == "the numbers do not fit"


def test_crashing_tool_returns_failure_and_is_audited(ctx, test_tools, caplog):
    with caplog.at_level(logging.ERROR, logger="openhive.engine.tool_calls"):
        result = call_tool(ctx, "zz_crash", '{"a": 1}')
    assert_failure_audited(result, tool_name="zz_crash", code="INTERNAL")
    assert "internal error in tool zz_crash" in result["error"]
    assert "boom" not in result["error"]  # the trace is for the operator's log, not the model
    assert any("boom inside the tool" in (r.exc_text or str(r.exc_info)) for r in caplog.records)


def test_non_dict_result_is_wrapped(ctx, test_tools):
    assert call_tool(ctx, "zz_plain_value", '{"a": 1}') == {"result": 42, "success": True}
    assert only_row().success


def test_a_tool_reporting_its_own_failure_is_audited_as_failed(ctx, test_tools):
    result = call_tool(ctx, "zz_own_failure", '{"a": 1}')
    assert_failure_audited(result, tool_name="zz_own_failure")
    assert result["error"] == "nothing to add"


def test_result_with_a_datetime_is_still_audited(ctx, test_tools):
    result = call_tool(ctx, "zz_dated", '{"a": 1}')
    assert result["success"] is True
    row = only_row()
    assert row.success and row.result["at"].startswith("2030-01-02")


def test_audit_row_is_linked_to_the_session_of_the_context(main_team, test_tools):
    from openhive.engine.models import Session

    session = Session.objects.create(team=main_team)
    ctx = ToolContext(team=main_team, session_id=session.pk)
    call_tool(ctx, "zz_add", '{"a": 1}')
    assert only_row().session == session


def test_credentials_in_arguments_are_never_audited(ctx, test_tools):
    arguments = {"note": f"use {SECRET} wisely", "credentials": [{"key": "TOKEN", "value": SECRET}]}
    result = call_tool(ctx, "zz_secret_echo", json.dumps(arguments))
    assert result["success"] is True
    row = only_row()
    stored = json.dumps([row.arguments, row.result, row.error])
    assert SECRET not in stored
    assert row.arguments["credentials"] == [{"key": "TOKEN", "value": "[REDACTED]"}]
    assert row.arguments["note"] == "use [REDACTED] wisely"


def test_credentials_are_scrubbed_from_the_audit_even_when_the_tool_crashes(ctx, test_tools):
    arguments = {"note": f"use {SECRET}", "credentials": [{"key": "TOKEN", "value": SECRET}]}
    result = call_tool(ctx, "zz_secret_crash", json.dumps(arguments))
    row = assert_failure_audited(result, tool_name="zz_secret_crash", code="INTERNAL")
    assert SECRET not in json.dumps([row.arguments, row.result, row.error])


def test_credentials_are_scrubbed_from_the_audit_when_validation_fails(ctx, test_tools):
    arguments = {
        "note": f"use {SECRET}",
        "credentials": [{"key": "TOKEN", "value": SECRET}],
        "unexpected": True,
    }
    result = call_tool(ctx, "zz_secret_echo", json.dumps(arguments))
    row = assert_failure_audited(result, tool_name="zz_secret_echo", code="INVALID_ARGUMENTS")
    assert SECRET not in json.dumps([row.arguments, row.result, row.error])


def test_call_tool_never_raises_even_if_the_audit_cannot_be_written(
    ctx, test_tools, monkeypatch, caplog
):
    def broken(**kwargs):
        raise RuntimeError("database is gone")

    monkeypatch.setattr(ToolCall.objects, "create", broken)
    with caplog.at_level(logging.ERROR):
        result = call_tool(ctx, "zz_add", '{"a": 1}')
    assert result == {"sum": 2, "success": True}
    assert any("could not record the audit row" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ('{"key": "k\\u0000", "content": "c"}', "arguments.key contains a NUL character"),
        ('{"key": "k", "content": "c\\ud800"}', "arguments.content contains an unpaired"),
        ({"key": "k", "content": "c", "tags": ["a\x00"]}, "arguments.tags[0] contains a NUL"),
        ('{"key": "k", "content": "c", "x\\u0000": 1}', "(a key) contains a NUL"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        (
            {"key": "k", "content": "c", "deep": json.loads('{"a":' * 101 + "1" + "}" * 101)},
            "nested more than 100 levels",
        ),
    ],
)
def test_text_no_database_stores_is_refused_and_the_refusal_audited(main_team, arguments, fragment):
    ctx = ToolContext(team=main_team, actor="main")
    result = call_tool(ctx, "memory_save", arguments)
    assert result["success"] is False and result["code"] == "INVALID_ARGUMENTS"
    assert fragment in result["error"]
    assert not main_team.memories.exists()
    row = ToolCall.objects.get()  # the refusal is audited, in a form both databases store
    assert row.success is False and row.tool == "memory_save"


def test_text_that_only_looks_unstorable_is_accepted(ctx, test_tools):
    """A backslash-u-0000 written out (six characters) and a hundred levels of nesting are
    stored: only a real NUL, a lone surrogate or deeper nesting is refused."""
    deep = json.loads('{"a":' * 99 + "1" + "}" * 99)
    note = "write \\u0000 to mean NUL " + json.dumps(deep)
    result = call_tool(ctx, "zz_secret_echo", {"note": note, "credentials": []})
    assert result == {"echo": note, "success": True}
    assert only_row().arguments["note"] == note
    ToolCall.objects.all().delete()
    result = call_tool(ctx, "zz_add", {"a": 1, "b": 2, "deep": deep})
    # Refused by the tool's own arguments model (no such field), not as unstorable text.
    assert result["code"] == "INVALID_ARGUMENTS" and "deep" in result["error"]
    assert "nested" not in result["error"]

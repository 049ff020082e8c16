"""Registering a plugin through `register_plugin_tool` (call_tool, audited): the file and its
hash, versions, reserved and invalid names, interface failures found by importing the module
in the sandbox, and the team's org-op mutex."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from openhive.core import paths
from openhive.engine.models import ToolCall
from openhive.tools.models import Plugin
from tasks.models import OrgOpLock

from .plugin_helpers import ADD, call_as, needs_bwrap, plugin, register

pytestmark = [pytest.mark.django_db, needs_bwrap]


def test_a_registered_plugin_is_stored_with_its_hash_and_offered(ops):
    result = register(ops, "add", ADD)
    assert result["success"], result
    digest = hashlib.sha256(ADD.encode()).hexdigest()
    assert result["tool"] == "plugin__add" and result["code_sha256"] == digest
    assert (paths.team_dir("ops") / "plugins" / "add.py").read_text() == ADD
    row = Plugin.objects.get(team=ops, tool_name="add")
    assert (row.status, row.source_hash, row.version) == ("active", digest, 1)
    assert row.description == "Add two numbers"
    assert row.parameters["required"] == ["a", "b"]
    audit = ToolCall.objects.get(tool="register_plugin_tool")
    assert audit.success and audit.result["code_sha256"] == digest
    assert call_as(ops, "plugin__add", a=2, b=3)["result"]["sum"] == 5


def test_registering_the_same_name_again_replaces_it_with_a_new_version(ops):
    assert register(ops, "add", ADD)["success"]
    newer = ADD.replace('"sum": args["a"] + args["b"]', '"sum": args["a"] + args["b"] + 100')
    result = register(ops, "add", newer)
    assert result["success"] and result["version"] == 2
    assert Plugin.objects.filter(team=ops, tool_name="add").count() == 1
    assert call_as(ops, "plugin__add", a=1, b=1)["result"]["sum"] == 102


@pytest.mark.parametrize("name", ["Add", "1add", "add-two", "add__two", "a" * 57, "add.py", ""])
def test_an_invalid_name_is_refused(ops, name):
    result = register(ops, name, ADD)
    assert result["success"] is False
    assert result["code"] in ("INVALID_NAME", "INVALID_ARGUMENTS"), result
    assert not Plugin.objects.exists()


@pytest.mark.parametrize("name", ["bash", "read_file", "spawn_team", "register_plugin_tool"])
def test_a_builtin_name_is_reserved(ops, name):
    result = register(ops, name, ADD)
    assert result["success"] is False and result["code"] == "RESERVED_NAME", result
    assert "reserved" in result["error"] and not Plugin.objects.exists()


@pytest.mark.parametrize(
    ("source", "line", "words"),
    [
        ('PARAMETERS = {"type": "object"}\n\ndef run(args):\n    return 1\n', 1, "DESCRIPTION"),
        ('DESCRIPTION = "x"\nPARAMETERS = {"type": "object"}\n', 1, "run"),
        (
            'DESCRIPTION = 42\nPARAMETERS = {"type": "object"}\n\ndef run(args):\n    return 1\n',
            1,
            "non-empty string",
        ),
        (
            'DESCRIPTION = "x"\nPARAMETERS = ["a"]\n\ndef run(args):\n    return 1\n',
            2,
            "must be a dict",
        ),
        (
            'DESCRIPTION = "x"\nPARAMETERS = {"type": "string"}\n\ndef run(args):\n    return 1\n',
            2,
            '"type": "object"',
        ),
        (
            'DESCRIPTION = "x"\nPARAMETERS = {"type": "object", "properties": {"a": '
            '{"type": "nope"}}}\n\ndef run(args):\n    return 1\n',
            2,
            "not a valid JSON Schema",
        ),
        (
            'DESCRIPTION = "x"\nPARAMETERS = {"type": "object"}\n\ndef run(a, b):\n    return 1\n',
            4,
            "exactly one argument",
        ),
        ('DESCRIPTION = "x"\nPARAMETERS = {"type": "object"}\nrun = 5\n', 3, "function"),
        (
            'DESCRIPTION = "x"\nPARAMETERS = {"type": "object"}\nraise ValueError("boom")\n'
            "\ndef run(args):\n    return 1\n",
            3,
            "ValueError: boom",
        ),
        ('DESCRIPTION = "x"\ndef run(args:\n    return 1\n', 2, "does not parse"),
    ],
)
def test_a_plugin_without_the_interface_is_refused_with_a_line(ops, source, line, words):
    result = register(ops, "broken", source)
    assert result["success"] is False and result["code"] == "INVALID_INTERFACE", result
    assert result["line"] == line, result
    assert words in result["error"]
    assert not Plugin.objects.exists()
    assert not (paths.team_dir("ops") / "plugins" / "broken.py").exists()


def test_registration_waits_for_the_team_mutex_and_gives_up_when_it_is_held(ops, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "ORG_OP_DRAIN_SECONDS": 0.3}
    now = timezone.now()
    OrgOpLock.objects.create(
        team=ops,
        holder="someone-else",
        operation="spawn_team",
        acquired_at=now,
        expires_at=now + timedelta(minutes=5),
    )
    result = register(ops, "add", ADD)
    assert result["success"] is False and result["code"] == "ORG_OP_PENDING", result
    assert not Plugin.objects.exists()
    OrgOpLock.objects.all().delete()
    assert register(ops, "add", ADD)["success"]
    assert not OrgOpLock.objects.exists()  # released after the registration


def test_plugins_are_team_local(ops, main_team):
    assert register(ops, "add", ADD)["success"]
    from tests.tools.conftest import make_team

    other = make_team("research", main_team)
    result = call_as(other, "plugin__add", a=1, b=2)
    assert result["success"] is False and result["code"] == "UNKNOWN_TOOL"


def test_a_plugin_has_the_standard_library_only(ops):
    at_import = "import django\n" + plugin("return 1")
    result = register(ops, "needs_django", at_import)
    assert result["success"] is False and result["code"] == "INVALID_INTERFACE"
    assert "No module named 'django'" in result["error"] and result["line"] == 1
    assert register(ops, "late_import", plugin("import yaml\nreturn 1"))["success"]
    late = call_as(ops, "plugin__late_import")
    assert late["success"] is False and late["code"] == "PLUGIN_ERROR"
    assert "No module named 'yaml'" in late["error"] and "late_import.py line 6" in late["error"]
    assert register(ops, "stdlib_only", plugin("import json\nreturn json.dumps([1])"))["success"]
    assert call_as(ops, "plugin__stdlib_only")["result"] == "[1]"

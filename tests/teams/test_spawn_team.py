"""spawn_team: rows, workspace, secrets and the bootstrap task, all or nothing."""

from __future__ import annotations

import json

import pytest
import yaml

from openhive.core import paths
from openhive.core.context import ToolContext
from openhive.core.errors import Conflict, DomainError
from openhive.engine.models import ToolCall
from openhive.engine.tool_calls import call_tool
from openhive.org import services as team_services
from openhive.org.services import team_spawn
from tasks.models import Task
from teams.models import ScopeKeyword, Team
from teams.services import WORKSPACE_FOLDERS
from tests.factories import TeamFactory
from vault import crypto
from vault.models import VaultEntry

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("vault_key")]

SECRET = "s3cr3t-value-123456"


@pytest.fixture
def ctx(main_team):
    return ToolContext(team=main_team, source_channel="web:alice", actor="main")


def spawn(ctx, **arguments) -> dict:
    arguments.setdefault("scope_accepts", ["operations"])
    return call_tool(ctx, "spawn_team", json.dumps(arguments))


def nothing_left_behind(name: str) -> None:
    assert not Team.objects.filter(name=name).exists()
    assert not VaultEntry.objects.exists()
    assert not ScopeKeyword.objects.exists()
    assert not Task.objects.exists()
    assert not paths.team_dir(name).exists()


def test_spawn_returns_queued_with_the_bootstrap_task(ctx):
    result = spawn(ctx, name="ops", description="Operations")
    assert result["success"] is True
    assert result["status"] == "queued" and result["team"] == "ops"
    task = Task.objects.get(pk=result["bootstrap_task_id"])
    assert "ops" in result["message_for_user"]
    assert "being set up" in result["message_for_user"]
    assert "note" not in result
    assert task.type == Task.Type.BOOTSTRAP and task.priority == Task.Priority.CRITICAL
    assert task.status == Task.Status.PENDING
    assert task.source_channel == "web:alice" and task.created_by == "main"
    assert "ops" in task.text and "Operations" in task.text


def test_spawn_creates_the_team_under_the_caller(ctx, main_team):
    spawn(ctx, name="ops", description="Operations", scope_accepts=["Deploy", "deploy ", "logs"])
    team = Team.objects.get(name="ops")
    assert team.parent == main_team and team.description == "Operations"
    assert team.bootstrapped is False and team.status == "active"
    assert sorted(k.keyword for k in team.scope_keywords.all()) == ["deploy", "logs"]


def test_spawn_scaffolds_the_workspace(ctx):
    spawn(ctx, name="ops", description="Operations")
    workspace = paths.team_dir("ops")
    for folder in WORKSPACE_FOLDERS:
        assert (workspace / folder).is_dir(), folder
    assert set(WORKSPACE_FOLDERS) == {"org-rules", "team-rules", "skills", "subagents", "plugins"}
    config = yaml.safe_load((workspace / "config.yaml").read_text())
    assert config["name"] == "ops" and config["parent"] == "main"
    assert config["description"] == "Operations"
    assert config["allowed_tools"] == ["*"] and config["provider_profile"] == "default"
    assert config["max_turns"] == 50
    assert not (workspace / "team-rules" / "team-context.md").exists()


def test_init_context_is_written_with_credentials_redacted(ctx):
    result = spawn(
        ctx,
        name="ops",
        init_context=f"We deploy with the token {SECRET} on Fridays.",
        credentials=[{"key": "API_TOKEN", "value": SECRET}],
    )
    assert result["success"] is True
    assert "Never repeat them" in result["note"]
    text = (paths.team_dir("ops") / "team-rules" / "team-context.md").read_text()
    assert text == "# Team context\n\nWe deploy with the token [REDACTED] on Fridays.\n"


def test_short_credentials_are_redacted_from_init_context_too(ctx):
    spawn(
        ctx,
        name="ops",
        init_context="The admin password is pa55wd, keep it safe.",
        credentials=[{"key": "ADMIN_PASSWORD", "value": "pa55wd"}],
    )
    text = (paths.team_dir("ops") / "team-rules" / "team-context.md").read_text()
    assert "pa55wd" not in text and "[REDACTED]" in text


def test_credentials_are_stored_encrypted_in_the_vault(ctx):
    spawn(ctx, name="ops", credentials=[{"key": "API_TOKEN", "value": SECRET}])
    entry = VaultEntry.objects.get(team__name="ops", key="API_TOKEN")
    assert entry.is_secret and entry.updated_by == "main"
    raw = VaultEntry.objects.filter(pk=entry.pk).values_list("value", flat=True).get()
    assert raw != SECRET and SECRET not in raw
    assert crypto.decrypt(raw) == SECRET


def test_credentials_never_reach_the_audit_or_config(ctx):
    spawn(ctx, name="ops", credentials=[{"key": "API_TOKEN", "value": SECRET}])
    row = ToolCall.objects.get(tool="spawn_team")
    assert row.success
    assert SECRET not in json.dumps([row.arguments, row.result, row.error])
    assert row.arguments["credentials"] == [{"key": "API_TOKEN", "value": "[REDACTED]"}]
    for path in paths.team_dir("ops").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(), path


@pytest.mark.parametrize(
    "name", ["Ops", "ops_team", "-ops", "ops-", "op--s", "../ops", "ops/x", "", "a" * 65]
)
def test_bad_slug_is_refused_and_changes_nothing(ctx, name):
    result = spawn(ctx, name=name)
    assert result["success"] is False
    assert result["code"] in ("INVALID_NAME", "INVALID_ARGUMENTS")
    assert "slug" in result["error"] or "name" in result["error"]
    assert Team.objects.count() == 1  # only main
    assert not Task.objects.exists()
    assert sorted(p.name for p in paths.teams_dir().iterdir()) == ["main"]


def test_duplicate_name_is_a_conflict(ctx):
    assert spawn(ctx, name="ops")["success"] is True
    result = spawn(ctx, name="ops", description="again")
    assert result["success"] is False and result["code"] == "CONFLICT"
    assert "already exists" in result["error"]
    assert Team.objects.filter(name="ops").count() == 1
    assert Task.objects.count() == 1
    assert (paths.team_dir("ops") / "config.yaml").exists()  # the first team keeps its workspace


def test_leftover_workspace_folder_is_a_conflict_and_is_kept(ctx):
    leftover = paths.team_dir("ops")
    (leftover / "notes").mkdir(parents=True)
    result = spawn(ctx, name="ops")
    assert result["success"] is False and result["code"] == "CONFLICT"
    assert str(leftover) in result["error"]
    assert (leftover / "notes").is_dir()
    assert not Team.objects.filter(name="ops").exists()


def test_missing_parent_workspace_is_fine(main_team):
    parent = TeamFactory(name="research", parent=main_team)  # no workspace on disk
    assert not paths.team_dir("research").exists()
    spawned = team_spawn(parent=parent, name="papers", description="Papers")
    assert spawned.team.parent == parent
    assert (paths.team_dir("papers") / "config.yaml").exists()
    config = yaml.safe_load((paths.team_dir("papers") / "config.yaml").read_text())
    assert config["parent"] == "research"


def test_a_child_can_spawn_its_own_child(ctx, main_team):
    spawn(ctx, name="ops")
    ops = Team.objects.get(name="ops")
    result = spawn(ToolContext(team=ops), name="ops-db")
    assert result["success"] is True
    assert Team.objects.get(name="ops-db").parent == ops


def test_failure_in_the_middle_leaves_nothing_behind(ctx, monkeypatch):
    def broken_enqueue(**kwargs):
        raise RuntimeError("queue is down")

    monkeypatch.setattr(team_services, "task_enqueue", broken_enqueue)
    result = spawn(
        ctx,
        name="ops",
        scope_accepts=["deploy"],
        init_context=f"token {SECRET}",
        credentials=[{"key": "API_TOKEN", "value": SECRET}],
    )
    assert result["success"] is False and result["code"] == "INTERNAL"
    nothing_left_behind("ops")


def test_domain_failure_in_the_middle_leaves_nothing_behind(main_team, monkeypatch):
    def refuse(**kwargs):
        raise DomainError("task text must not be empty", code="invalid_task")

    monkeypatch.setattr(team_services, "task_enqueue", refuse)
    with pytest.raises(DomainError):
        team_spawn(
            parent=main_team, name="ops", credentials={"API_TOKEN": SECRET}, init_context="x"
        )
    nothing_left_behind("ops")


def test_service_refuses_duplicates_directly(main_team):
    team_spawn(parent=main_team, name="ops")
    with pytest.raises(Conflict):
        team_spawn(parent=main_team, name="ops")


def test_ensure_main_is_idempotent_and_scaffolds(db):
    from teams.services import team_ensure_main

    first = team_ensure_main()
    second = team_ensure_main()
    assert first.pk == second.pk and first.bootstrapped and first.parent is None
    config = yaml.safe_load((paths.team_dir("main") / "config.yaml").read_text())
    assert config["name"] == "main" and config["parent"] is None and config["max_turns"] == 200
    for folder in WORKSPACE_FOLDERS:
        assert (paths.team_dir("main") / folder).is_dir()


@pytest.mark.parametrize("name", ["tree", "main"])
def test_reserved_team_names_are_refused(main_team, name):
    from openhive.core.errors import DomainError
    from openhive.org.services import team_spawn

    with pytest.raises(DomainError, match="reserved"):
        team_spawn(parent=main_team, name=name)

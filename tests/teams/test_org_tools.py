"""Org tools on the tree: shutdown_team, update_team, get_status, send_message, escalate,
through call_tool (validation, guards, audit) like a session calls them."""

from __future__ import annotations

import json

import pytest
from django.apps import apps

from memory.models import Memory
from openhive.chat.models import OutboxMessage
from openhive.core import paths
from openhive.core.context import ToolContext
from openhive.engine.models import Session, ToolCall
from openhive.engine.tool_calls import call_tool
from openhive.org.services import team_spawn
from tasks.models import OrgOpLock, Task
from tasks.services import task_enqueue
from teams.agent import agent_spec_for
from teams.models import ScopeKeyword, Team, TeamMessage
from tests.factories import claim
from triggers.models import TriggerConfig
from vault.services import vault_store_secret

pytestmark = pytest.mark.django_db


def call(caller: Team, tool: str, /, _channel: str = "", **arguments) -> dict:
    ctx = ToolContext(team=caller, source_channel=_channel, actor=f"{caller.name}-agent")
    return call_tool(ctx, tool, json.dumps(arguments))


def spawn(parent: Team, name: str, keywords=("ops",)) -> Team:
    return team_spawn(parent=parent, name=name, scope_accepts=list(keywords)).team


def next_prompt(team: Team) -> str:
    """The dynamic part of the system prompt the team's next session starts with."""
    return agent_spec_for(team).system_messages[1]["content"]


@pytest.fixture
def tree(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    ops = spawn(main_team, "ops", ["ops", "disk"])
    research = spawn(main_team, "research", ["papers"])
    db = spawn(ops, "ops-db", ["postgres"])
    return main_team, ops, research, db


# --- shutdown_team ----------------------------------------------------------------------------


def _team_scoped_counts(team_ids: list[int]) -> dict[str, int]:
    """Rows in every installed model that point at one of these teams (any FK to Team)."""
    counts = {}
    for model in apps.get_models():
        for f in model._meta.get_fields():
            if f.many_to_one and f.concrete and f.related_model is Team:
                n = model.objects.filter(**{f"{f.name}__in": team_ids}).count()
                counts[f"{model._meta.label}.{f.name}"] = n
    return counts


def _populate(team: Team, other: Team) -> None:
    task = task_enqueue(team=team, text="work")
    claim(task_id=task.pk, worker="w")
    task_enqueue(team=team, text="more work")
    TriggerConfig.objects.create(team=team, name="nightly", type="schedule", task="x")
    Memory.objects.create(team=team, key="k", content="remember")
    vault_store_secret(team=team, key="API_KEY", value="sk-a-long-secret-123", updated_by="t")
    Session.objects.create(team=team, kind=Session.Kind.TASK, task=task)
    TeamMessage.objects.create(sender=team, recipient=other, content="hi")
    TeamMessage.objects.create(sender=other, recipient=team, content="hello")


def test_shutdown_with_cascade_removes_every_team_scoped_row_and_folder(
    tree, django_capture_on_commit_callbacks
):
    main, ops, research, db = tree
    for team in (ops, db):
        _populate(team, research)
    removed_ids = [ops.pk, db.pk]
    before = _team_scoped_counts(removed_ids)
    assert sum(before.values()) > 10
    research_before = _team_scoped_counts([research.pk])

    with django_capture_on_commit_callbacks(execute=True):
        result = call(main, "shutdown_team", name="ops", cascade=True)

    assert result == {"success": True, "team": "ops", "removed": ["ops-db", "ops"]}
    after = _team_scoped_counts(removed_ids)
    # Only the audit trail keeps the team's name (its FK is nulled, so it points at nothing).
    assert all(n == 0 for n in after.values()), after
    assert not Team.objects.filter(pk__in=removed_ids).exists()
    assert not paths.team_dir("ops").exists() and not paths.team_dir("ops-db").exists()
    assert Task.objects.filter(team__name="research").exists()
    research_after = _team_scoped_counts([research.pk])
    # research loses only the messages exchanged with the removed teams
    assert research_after["teams.TeamMessage.recipient"] == 0
    assert research_before["teams.TeamMessage.recipient"] == 2
    assert paths.team_dir("research").exists()
    assert ToolCall.objects.filter(tool="shutdown_team", success=True).count() == 1


def test_shutdown_cancels_running_work_and_sends_task_finished(tree):
    from tasks.signals import task_finished

    main, ops, _, _ = tree
    task = task_enqueue(team=ops, text="long work")
    claim(task_id=task.pk, worker="w")
    seen = []

    def receiver(sender, task, **kwargs):
        seen.append((task.pk, task.status))

    task_finished.connect(receiver)
    try:
        call(main, "shutdown_team", name="ops", cascade=True)
    finally:
        task_finished.disconnect(receiver)
    assert (task.pk, "cancelled") in seen
    # every in-flight task of both removed teams (work and bootstraps) ended as cancelled
    assert len(seen) == 3 and {status for _, status in seen} == {"cancelled"}


def test_shutdown_without_cascade_refuses_and_names_the_children(tree):
    main, _ops, _, _ = tree
    result = call(main, "shutdown_team", name="ops")
    assert result == {
        "success": False,
        "error": 'team "ops" has 1 active children (ops-db): shut them down first, or pass '
        "cascade: true",
        "code": "HAS_CHILDREN",
    }
    assert Team.objects.filter(name__in=["ops", "ops-db"]).count() == 2
    assert paths.team_dir("ops").exists()


def test_shutdown_of_a_grandchild_or_unknown_team_is_refused(tree):
    main, ops, _, _db = tree
    assert call(main, "shutdown_team", name="ops-db")["code"] == "NOT_PARENT"
    assert call(main, "shutdown_team", name="nope") == {
        "success": False,
        "error": 'team "nope" not found',
        "code": "NOT_FOUND",
    }
    assert call(ops, "shutdown_team", name="ops-db")["success"] is True
    assert not Team.objects.filter(name="ops-db").exists()


def test_shutdown_takes_and_releases_the_callers_org_op_mutex(tree):
    main, _, _, _ = tree
    assert call(main, "shutdown_team", name="research")["success"]
    assert not OrgOpLock.objects.exists()


# --- update_team ------------------------------------------------------------------------------


def test_update_team_applies_the_delta_and_returns_the_sorted_scope(tree):
    main, ops, _, _ = tree
    result = call(
        main, "update_team", team="ops", scope_add=[" Kubernetes ", "disk"], scope_remove=["ops"]
    )
    assert result == {"success": True, "team": "ops", "scope": ["disk", "kubernetes"]}
    assert sorted(ops.scope_keywords.values_list("keyword", flat=True)) == ["disk", "kubernetes"]


def test_update_team_never_leaves_zero_keywords(tree):
    main, ops, _, _ = tree
    result = call(main, "update_team", team="ops", scope_remove=["ops", "disk"])
    assert result == {
        "success": False,
        "error": 'update would leave team "ops" with zero scope keywords',
        "code": "ZERO_SCOPE",
    }
    assert ScopeKeyword.objects.filter(team=ops).count() == 2


def test_update_team_needs_a_change_and_a_child(tree):
    main, _ops, research, _db = tree
    assert call(main, "update_team", team="ops")["code"] == "INVALID_INPUT"
    assert call(main, "update_team", team="ops-db", scope_add=["x"])["code"] == "NOT_PARENT"
    assert call(research, "update_team", team="ops", scope_add=["x"])["code"] == "NOT_PARENT"
    assert call(main, "update_team", team="ghost", scope_add=["x"])["code"] == "NOT_FOUND"
    assert not ScopeKeyword.objects.filter(keyword="x").exists()


# --- get_status -------------------------------------------------------------------------------


def test_get_status_reports_live_queue_state_of_each_child(tree):
    main, ops, _research, _ = tree
    Task.objects.filter(team=ops).delete()
    running = task_enqueue(team=ops, text="rotate the logs")
    claim(task_id=running.pk, worker="w")
    pending = task_enqueue(team=ops, text="check disk", priority=Task.Priority.HIGH)
    done = task_enqueue(team=ops, text="old")
    Task.objects.filter(pk=done.pk).update(status="done")

    result = call(main, "get_status", team="ops")
    assert result["success"] is True
    (status,) = result["teams"]
    assert status == {
        "team": "ops",
        "status": "active",
        "active_daily_ops": 1,
        "max_concurrent_daily_ops": 5,
        "saturation": False,
        "org_op_pending": False,
        "queue_depth": 1,  # pending only: finished history is not queue depth
        "current_task": "rotate the logs",
        "pending_tasks": [
            {
                "task_id": pending.pk,
                "type": "delegate",
                "priority": "high",
                "text": "check disk",
                "created_at": pending.created_at.isoformat(),
            }
        ],
    }
    every = call(main, "get_status")
    assert [t["team"] for t in every["teams"]] == ["ops", "research"]
    research_status = every["teams"][1]
    assert research_status["current_task"] is None and research_status["queue_depth"] == 1


def test_get_status_shows_saturation_bootstrap_and_org_op(tree, settings):
    from datetime import timedelta

    from django.utils import timezone

    main, ops, _, _ = tree
    (ops_dir := paths.team_dir("ops") / "config.yaml").write_text(
        ops_dir.read_text().replace("max_concurrent_daily_ops: 5", "max_concurrent_daily_ops: 1")
    )
    boot = Task.objects.get(team=ops, type="bootstrap")
    claim(task_id=boot.pk, worker="w")
    now = timezone.now()
    OrgOpLock.objects.create(
        team=ops, holder="h", acquired_at=now, expires_at=now + timedelta(minutes=1)
    )
    (status,) = call(main, "get_status", team="ops")["teams"]
    assert status["saturation"] is True and status["max_concurrent_daily_ops"] == 1
    assert status["current_task"] == "(initializing)" and status["org_op_pending"] is True


def test_get_status_only_for_children(tree):
    main, ops, _, _ = tree
    assert call(main, "get_status", team="ops-db")["code"] == "NOT_PARENT"
    assert call(ops, "get_status")["teams"][0]["team"] == "ops-db"


# --- send_message and escalate ----------------------------------------------------------------


def test_send_message_is_stored_and_shown_once_in_the_targets_next_session(tree):
    _main, ops, _, db = tree
    result = call(ops, "send_message", target="ops-db", message="Vacuum tonight please")
    assert result == {"success": True, "delivered_to": "ops-db", "message_id": result["message_id"]}
    message = TeamMessage.objects.get(pk=result["message_id"])
    assert (message.sender, message.recipient, message.kind) == (ops, db, "message")
    assert message.delivered_at is None

    prompt = next_prompt(db)
    assert "Messages from other teams" in prompt
    assert "message from parent team `ops`" in prompt and "Vacuum tonight please" in prompt
    message.refresh_from_db()
    assert message.delivered_at is not None
    assert "Vacuum tonight" not in next_prompt(db)  # shown once


def test_send_message_goes_up_to_the_parent_too(tree):
    _, ops, _, db = tree
    assert call(db, "send_message", target="ops", message="done")["delivered_to"] == "ops"
    assert "message from child team `ops-db`" in next_prompt(ops)


def test_send_message_refuses_siblings_grandparents_and_unknown_teams(tree):
    _main, ops, _research, db = tree
    assert call(ops, "send_message", target="research", message="x")["code"] == (
        "NOT_PARENT_OR_CHILD"
    )
    assert call(db, "send_message", target="main", message="x")["code"] == "NOT_PARENT_OR_CHILD"
    assert call(ops, "send_message", target="ghost", message="x")["code"] == "NOT_FOUND"
    assert call(ops, "send_message", target="ops-db", message="")["code"] == "INVALID_ARGUMENTS"
    assert not TeamMessage.objects.exists()


def test_send_message_never_carries_a_known_secret(tree):
    _, ops, _, _db = tree
    vault_store_secret(team=ops, key="TOKEN", value="tok-very-secret-4242", updated_by="t")
    call(ops, "send_message", target="ops-db", message="use tok-very-secret-4242")
    assert TeamMessage.objects.get().content == "use [REDACTED]"


def test_escalate_from_a_child_notifies_the_parent_only(tree):
    _, ops, _, db = tree
    result = call(db, "escalate", message="Replica lag 30 min", reason="lag")
    assert result == {
        "success": True,
        "correlation_id": result["correlation_id"],
        "notification_only": True,
        "delivered_to": "ops",
    }
    assert result["correlation_id"].startswith("escalation:ops-db:")
    message = TeamMessage.objects.get()
    assert (message.recipient, message.kind, message.reason) == (ops, "escalation", "lag")
    assert not Task.objects.filter(team=ops, type="escalation").exists()  # no work created
    assert "[ESCALATION from child team `ops-db`" in next_prompt(ops)


def test_escalate_from_main_reaches_the_user_through_the_outbox(tree):
    main, _, _, _ = tree
    result = call(main, "escalate", _channel="web:alice", message="Budget exceeded")
    assert result["delivered_to"] == "user" and result["notification_only"] is True
    note = OutboxMessage.objects.get()
    assert note.channel_id == "web:alice" and note.content == "[main] Escalation: Budget exceeded"
    # Stored in the chat's history as an escalation, naming the team once.
    stored = note.message
    assert (stored.role, stored.team_name) == ("escalation", "main")
    assert stored.content == "Escalation: Budget exceeded"


def test_escalate_from_main_without_a_channel_says_so(tree):
    main, _, _, _ = tree
    result = call(main, "escalate", message="x")
    assert result["success"] is False and result["code"] == "NO_CHANNEL"
    assert not OutboxMessage.objects.exists()


# --- spawn_team guards added by this issue ------------------------------------------------------


def test_spawn_needs_scope_keywords_unless_a_config_path_is_given(main_team, openhive_dirs):
    refused = call(main_team, "spawn_team", name="web")
    assert refused == {
        "success": False,
        "error": "scope_accepts with at least one keyword is required when config_path is not "
        "provided",
        "code": "INVALID_INPUT",
    }
    assert not Team.objects.filter(name="web").exists()
    config = openhive_dirs / "data" / "config" / "teams" / "web.yaml"
    config.parent.mkdir()
    config.write_text("max_concurrent_daily_ops: 2\nallowed_tools: ['list_*']\nname: evil\n")
    result = call(main_team, "spawn_team", name="web", config_path="teams/web.yaml")
    assert result["success"] is True and result["status"] == "queued"
    from teams.config import load_team_config

    loaded = load_team_config("web")
    assert (loaded.name, loaded.parent) == ("web", "main")  # never taken from the file
    assert loaded.max_concurrent_daily_ops == 2 and loaded.allowed_tools == ["list_*"]


@pytest.mark.parametrize(
    "where",
    [
        "{tmp}/elsewhere.yaml",  # outside the data dir
        "{data}/web.yaml",  # in the data dir, not in its config folder
        "{run}/teams/main/config.yaml",  # another team's config in the runtime dir
        "../web.yaml",
        "teams/web.txt",  # not YAML
    ],
)
def test_spawn_refuses_a_config_path_outside_the_config_folder(main_team, openhive_dirs, where):
    path = where.format(
        tmp=openhive_dirs.parent, data=openhive_dirs / "data", run=openhive_dirs / "run"
    )
    result = call(main_team, "spawn_team", name="web", config_path=path)
    assert result["success"] is False and result["code"] == "CONFIG_ERROR"
    assert "must name a .yaml file in the config folder" in result["error"]
    assert not Team.objects.filter(name="web").exists() and not paths.team_dir("web").exists()


LEAKY = "sk-live-0123456789abcdefghijklmnop"


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("providers.yaml", f"profiles: {{default: {{model: x, api_key: {LEAKY}}}}}\n", "system"),
        ("channels.yaml", "trust: {default_policy: allow}\n", "system configuration"),
        ("odd.yaml", f"max_concurrent_daily_ops: {LEAKY}\n", "max_concurrent_daily_ops"),
        ("list.yaml", f"- {LEAKY}\n", "expected a mapping"),
        ("broken.yaml", f"a: [{LEAKY}\n b: c: d\n", "at line"),
        ("binary.yaml", None, "not a UTF-8 text file"),
    ],
)
def test_a_config_path_error_never_echoes_the_files_values(
    main_team, openhive_dirs, name, content, fragment
):
    target = openhive_dirs / "data" / "config" / name
    if content is None:
        target.write_bytes(bytes(range(256)) + LEAKY.encode())
    else:
        target.write_text(content)
    result = call(main_team, "spawn_team", name="web", config_path=name)
    assert result["success"] is False and result["code"] == "CONFIG_ERROR", result
    assert fragment in result["error"]
    assert LEAKY not in result["error"] and "0123456789" not in result["error"]
    assert not Team.objects.filter(name="web").exists()


def test_spawn_takes_and_releases_the_callers_org_op_mutex(main_team):
    assert call(main_team, "spawn_team", name="web", scope_accepts=["html"])["success"]
    assert not OrgOpLock.objects.exists()

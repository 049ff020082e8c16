"""The bootstrap that builds a team, through the real task runner and the scripted provider:
what it may do with its tools, what the system adds (per-subagent learning and reflection
triggers, active and gated) and records, the notice on success, and a clear failure."""

from __future__ import annotations

import pytest

from openhive.chat.models import OutboxMessage
from openhive.core import paths
from openhive.org.services import bootstrap_text, team_bootstrap_record, team_spawn
from tasks.models import Task
from tasks.runner import run_task
from teams.models import Team
from triggers.models import TriggerConfig

pytestmark = pytest.mark.django_db(transaction=True)

SKILL = "---\nname: log-triage\ndescription: Triage logs\n---\n1. Read the logs.\n"
SUBAGENT = "---\ndescription: Watches the logs\ntools: [read_file, grep]\n---\nYou read logs.\n"


@pytest.fixture
def ops(main_team, vault_key):
    return team_spawn(
        parent=main_team,
        name="ops",
        description="Operations",
        init_context="We watch the build servers.",
        credentials={"grafana_token": "tok-very-secret-123"},
        source_channel="web:alice",
    ).team


def build_script(subagent_text: str = SUBAGENT) -> list[dict]:
    return [
        {
            "when": {"team": "ops", "last": "user", "matches": "^Bootstrap"},
            "reply": {
                "tool_calls": [
                    {"name": "vault_list", "arguments": {}},
                    {
                        "name": "memory_save",
                        "arguments": {
                            "key": "identity",
                            "type": "identity",
                            "content": "We are ops: we watch the build servers.",
                        },
                    },
                    {
                        "name": "write_file",
                        "arguments": {"path": "subagents/log-watcher.md", "content": subagent_text},
                    },
                    {
                        "name": "write_file",
                        "arguments": {
                            "path": "skills/log-triage/SKILL.md",
                            "content": SKILL,
                        },
                    },
                ]
            },
        },
        {
            "when": {"team": "ops", "last": "tool", "tool": "write_file"},
            "reply": {"content": "Ops is ready to watch the build servers."},
        },
    ]


def test_bootstrap_instructions_cover_every_step_of_building_the_team(ops):
    text = bootstrap_text(ops)
    assert text.startswith("Bootstrap this team (ops). Its purpose: Operations.")
    for step in (
        "vault_list",
        "memory_save",
        "subagents/<name>.md",
        "skills/<name>/SKILL.md",
        "register_plugin_tool",
        "learning and a reflection",
    ):
        assert step in text


def test_a_bootstrap_builds_the_team_and_the_system_seeds_its_cycles(ops, scripted_provider):
    scripted_provider(build_script())
    task = ops.tasks.get(type=Task.Type.BOOTSTRAP)
    assert run_task(task.pk) == "done"
    assert Team.objects.get(pk=ops.pk).bootstrapped
    workspace = paths.team_dir("ops")
    assert (workspace / "subagents" / "log-watcher.md").read_text() == SUBAGENT
    assert (workspace / "skills" / "log-triage" / "SKILL.md").is_file()
    identity = ops.memories.get(key="identity", active=True)
    assert identity.type == "identity" and "build servers" in identity.content
    cycles = {t.name: t for t in TriggerConfig.objects.filter(team=ops)}
    assert set(cycles) == {"learning-cycle-log-watcher", "reflection-cycle-log-watcher"}
    learning = cycles["learning-cycle-log-watcher"]
    # Active at once (ADR-35): every firing passes the readiness gates before a task exists.
    assert learning.state == "active" and learning.subagent == "log-watcher"
    assert learning.type == "schedule" and learning.config["cron"].endswith(" 2 * * *")
    assert learning.overlap_policy == "always-skip" and learning.max_turns == 100
    assert cycles["reflection-cycle-log-watcher"].config["cron"].endswith(" 3 * * *")
    task.refresh_from_db()
    assert task.result.startswith("Ops is ready to watch the build servers.")
    assert (
        "Built: subagents: log-watcher; skills: log-triage; plugins: none; memories: identity;"
        in (task.result)
    )
    assert "learning-cycle-log-watcher" in task.result
    assert OutboxMessage.objects.get().content == "[ops] Team bootstrapped and ready."
    # The secret was listed by key, never by value.
    assert "tok-very-secret-123" not in task.result


def test_a_bootstrap_that_leaves_a_broken_subagent_fails_with_a_clear_notice(
    ops, scripted_provider, settings
):
    settings.OPENHIVE = {**settings.OPENHIVE, "BOOTSTRAP_MAX_RETRIES": 0}
    scripted_provider(build_script("You read logs (no front matter)."))
    task = ops.tasks.get(type=Task.Type.BOOTSTRAP)
    assert run_task(task.pk) == "failed"
    task.refresh_from_db()
    assert task.result.startswith("The bootstrap left files that cannot be used: ")
    assert "subagents/log-watcher.md must start with a front matter block" in task.result
    assert not Team.objects.get(pk=ops.pk).bootstrapped
    assert not TriggerConfig.objects.exists()
    notice = OutboxMessage.objects.get().content
    assert notice.startswith("[ops] Team bootstrap failed: The bootstrap left files")


def test_a_failed_bootstrap_is_retried_before_the_notice(ops, scripted_provider, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "BOOTSTRAP_MAX_RETRIES": 1}
    scripted_provider(build_script("broken"))
    task = ops.tasks.get(type=Task.Type.BOOTSTRAP)
    run_task(task.pk)
    task.refresh_from_db()
    assert task.status == "pending" and not OutboxMessage.objects.exists()


def test_recording_twice_seeds_nothing_twice(ops, scripted_provider):
    folder = paths.team_dir("ops") / "subagents"
    (folder / "log-watcher.md").write_text(SUBAGENT)
    first = team_bootstrap_record(team=ops)
    second = team_bootstrap_record(team=ops)
    assert len(first.seeded) == 2 and second.seeded == []
    assert TriggerConfig.objects.filter(team=ops).count() == 2


def test_a_bootstrap_that_leaves_a_broken_skill_fails_naming_it(ops, scripted_provider, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "BOOTSTRAP_MAX_RETRIES": 0}
    scripted_provider(build_script())
    broken = paths.team_dir("ops") / "skills" / "half-done"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("no front matter at all")
    task = ops.tasks.get(type=Task.Type.BOOTSTRAP)
    assert run_task(task.pk) == "failed"
    task.refresh_from_db()
    assert task.result.startswith("The bootstrap left files that cannot be used: ")
    assert "skills/half-done" in task.result
    assert not TriggerConfig.objects.exists()

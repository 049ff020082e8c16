"""The offline demo's full bootstrap, in process through the real task runner: `init --demo`'s
script, the main agent spawning ops, ops building itself (identity memory, a subagent, a
skill, a plugin), the system seeding its cycles, then ops handing real work to its subagent,
which uses the plugin."""

from __future__ import annotations

import shutil

import pytest

from openhive.chat.models import OutboxMessage
from openhive.cli.setup import install_demo_script, use_demo_provider
from openhive.core import paths
from openhive.core.registry import team_tools
from openhive.engine.models import Session, ToolCall
from openhive.tools.models import Plugin
from tasks.models import Task
from tasks.runner import run_task
from teams.agent import run_team_session
from teams.models import Team
from teams.subagents import load_subagents
from triggers.models import TriggerConfig

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # The plugin's interface check and its calls run in the sandbox.
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]


def test_the_demo_bootstraps_ops_offline_and_ops_delegates_to_its_subagent(main_team):
    install_demo_script()
    assert use_demo_provider()

    spawned = run_team_session(main_team, "spawn a team called ops", source_channel="web:demo")
    assert spawned.ok, spawned.error
    ops = Team.objects.get(name="ops")
    bootstrap = ops.tasks.get(type=Task.Type.BOOTSTRAP)
    assert run_task(bootstrap.pk) == "done"

    # What the team built with its tools.
    workspace = paths.team_dir("ops")
    subagents, problems = load_subagents("ops")
    assert [s.name for s in subagents] == ["disk-keeper"] and problems == []
    assert "plugin__*" in (subagents[0].tools or ())
    skill = (workspace / "skills" / "disk-check" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: disk-check\n")
    identity = ops.memories.get(key="identity", active=True)
    assert identity.type == "identity" and "build servers" in identity.content
    tools = list(ToolCall.objects.filter(team=ops).order_by("id").values_list("tool", "success"))
    assert tools == [
        ("vault_list", True),
        ("memory_save", True),
        ("write_file", True),
        ("write_file", True),
        ("register_plugin_tool", True),
    ]
    plugin = Plugin.objects.get(team=ops)
    assert plugin.offered_name == "plugin__disk_verdict" and plugin.status == "active"
    assert "plugin__disk_verdict" in {spec.name for spec in team_tools(ops, ["plugin__*"])}
    # What the system added and recorded.
    triggers = TriggerConfig.objects.filter(team=ops).order_by("name")
    assert [(t.name, t.state, t.subagent) for t in triggers] == [
        ("learning-cycle-disk-keeper", "active", "disk-keeper"),
        ("reflection-cycle-disk-keeper", "active", "disk-keeper"),
    ]
    bootstrap.refresh_from_db()
    assert (
        "Built: subagents: disk-keeper; skills: disk-check; plugins: plugin__disk_verdict; "
        "memories: identity; triggers: learning-cycle-disk-keeper, reflection-cycle-disk-keeper"
    ) in bootstrap.result
    assert Team.objects.get(pk=ops.pk).bootstrapped
    assert OutboxMessage.objects.filter(content="[ops] Team bootstrapped and ready.").exists()

    # Work for ops goes through its subagent.
    asked = run_team_session(main_team, "ask ops to check the disks", source_channel="web:demo")
    assert asked.ok, asked.error
    work = ops.tasks.get(type=Task.Type.DELEGATE)
    assert run_task(work.pk) == "done"
    work.refresh_from_db()
    assert work.result == "All build servers are below 70% disk usage; nothing to do."
    child = Session.objects.get(kind="subagent")
    orchestrator = Session.objects.get(task=work, kind="task")
    assert child.agent_name == "disk-keeper" and child.task_id == work.pk
    assert child.parent_session_id == orchestrator.pk and child.parent_task_id == work.pk
    # The subagent used the plugin its team registered, in its own session.
    verdict = ToolCall.objects.get(tool="plugin__disk_verdict")
    assert verdict.session_id == child.pk and verdict.success
    assert verdict.result["result"] == {"highest": 66, "verdict": "ok"}

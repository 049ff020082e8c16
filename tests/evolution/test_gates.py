"""Readiness gates are code: a cycle trigger that fires for a team not ready is skipped with
the reason logged and recorded, and no task (so no model call) exists; a ready one starts a
run with topics picked by code. Seeding gives each subagent its own minute, and main none."""

from __future__ import annotations

import logging

import pytest

from evolution.models import CycleRun
from openhive.core import paths
from openhive.org.services import team_bootstrap_record
from tasks.models import Task
from teams.models import Team
from triggers.models import TriggerEvent
from vault.services import vault_read

from .conftest import allow_tools, fire, fired_task

pytestmark = pytest.mark.django_db


def assert_skipped(trigger, caplog, reason_part: str) -> CycleRun:
    with caplog.at_level(logging.INFO):
        result = fire(trigger)
    assert result.outcome == "skipped" and result.task_id is None
    assert not Task.objects.exists()
    run = CycleRun.objects.get()
    assert run.outcome == "skipped" and reason_part in run.reason and run.task_id is None
    assert TriggerEvent.objects.get(trigger=trigger).outcome == "skipped"
    assert any(
        reason_part in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records
    )
    return run


def test_a_cycle_of_a_team_not_bootstrapped_is_skipped_with_the_reason(ops, cycle_trigger, caplog):
    Team.objects.filter(pk=ops.pk).update(bootstrapped=False)
    assert_skipped(cycle_trigger("learning"), caplog, "not bootstrapped")


def test_a_cycle_of_a_team_without_scope_keywords_is_skipped(ops, cycle_trigger, caplog):
    ops.scope_keywords.all().delete()
    assert_skipped(cycle_trigger("learning"), caplog, "no scope keywords")


def test_a_cycle_without_the_tools_it_needs_is_skipped_naming_them(ops, cycle_trigger, caplog):
    allow_tools(ops, ["memory_*", "vault_*", "record_learning", "read_file"])
    run = assert_skipped(cycle_trigger("learning"), caplog, "web_fetch")
    assert "memory_search" not in run.reason


def test_a_subagent_that_narrows_away_a_needed_tool_is_not_ready(ops, cycle_trigger, caplog):
    (paths.team_dir("ops") / "subagents" / "scout.md").write_text(
        "---\ndescription: Researches\ntools: [web_fetch]\n---\nBody\n"
    )
    assert_skipped(cycle_trigger("reflection"), caplog, "narrowed by the subagent")


def test_a_ready_learning_cycle_gets_a_run_topics_and_its_procedure(ops, cycle_trigger):
    trigger = cycle_trigger("learning")
    task = fired_task(trigger)
    run = CycleRun.objects.get()
    assert run.outcome == "started" and run.task_id == task.pk and run.kind == "learning"
    assert run.topics == ["backups", "disks", "postgres"]
    assert task.options["cycle_run"] == run.pk and task.options["subagent"] == "scout"
    assert "# Learning cycle" in task.text and "Topics for this cycle: backups, disks" in task.text
    # The next cycle rotates on through the keywords, from the journal in the vault.
    fired_task(trigger, key="slot-2")
    assert CycleRun.objects.order_by("id").last().topics == ["tls", "backups", "disks"]
    journal = vault_read(team=ops, key="learning:ops:scout:journal")
    assert journal is not None and not journal.is_secret
    assert '"next_topic": 2' in journal.value


def test_a_trigger_test_of_an_unready_cycle_is_skipped_too(ops, cycle_trigger):
    from triggers.services import trigger_test

    ops.scope_keywords.all().delete()
    assert trigger_test(trigger=cycle_trigger("reflection")).outcome == "skipped"
    assert not Task.objects.exists()


def test_seeding_gives_each_subagent_its_own_minute_active_and_main_none(ops, main_team):
    folder = paths.team_dir("ops") / "subagents"
    for name in ("alpha", "beta", "gamma"):
        (folder / f"{name}.md").write_text(f"---\ndescription: {name}\n---\nBody\n")
    record = team_bootstrap_record(team=ops)
    triggers = ops.triggers.filter(name__startswith="learning-cycle-")
    assert triggers.count() == 4 and all(t.state == "active" for t in triggers)
    minutes = {t.config["cron"].split()[0] for t in triggers}
    assert len(minutes) > 1
    assert {t.name for t in ops.triggers.all()} >= set(record.seeded)
    main_agents = paths.team_dir("main") / "subagents"
    main_agents.mkdir(parents=True, exist_ok=True)
    (main_agents / "router.md").write_text("---\ndescription: routes\n---\nBody\n")
    team_bootstrap_record(team=main_team)
    assert not main_team.triggers.exists()


def test_the_trigger_admin_page_says_whether_a_cycle_is_ready(ops, cycle_trigger, admin_client):
    from django.urls import reverse

    trigger = cycle_trigger("learning")
    url = reverse("admin:triggers_triggerconfig_change", args=[trigger.pk])
    assert b"ready" in admin_client.get(url).content
    ops.scope_keywords.all().delete()
    page = admin_client.get(url).content.decode()
    assert "not ready: team ops has no scope keywords" in page


def test_status_says_whether_each_cycle_is_ready(ops, cycle_trigger):
    from io import StringIO

    from django.core.management import call_command

    cycle_trigger("learning")
    cycle_trigger("reflection")
    allow_tools(ops, ["web_fetch", "memory_search", "vault_get", "record_learning"])
    out = StringIO()
    call_command("openhive", "status", stdout=out)
    text = out.getvalue()
    assert "ops/learning-cycle-scout [schedule, active]" in text
    learning_line = next(line for line in text.splitlines() if "learning-cycle-scout" in line)
    assert learning_line.endswith("; ready")
    reflection_line = next(line for line in text.splitlines() if "reflection-cycle-scout" in line)
    assert "not ready: the reflection cycle needs tools" in reflection_line
    assert "list_completed_tasks" in reflection_line

"""The seeded cycle triggers run on the engine's clock (a fake `now`): at its minute, a cycle
of a team that is not ready is skipped with no task; once the team is ready, the next day's
slot starts a run with its task."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from evolution.models import CycleRun
from openhive.org.services import team_bootstrap_record
from tasks.models import Task
from teams.models import ScopeKeyword
from triggers.clock import clock_pass

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_clock_skips_an_unready_cycle_then_starts_it_once_ready(ops):
    ops.scope_keywords.all().delete()
    team_bootstrap_record(team=ops)
    trigger = ops.triggers.get(name="learning-cycle-scout")
    minute = int(trigger.config["cron"].split()[0])
    slot = datetime(2026, 11, 20, 2, minute, tzinfo=UTC)
    clock_pass(slot - timedelta(minutes=5))  # arms the trigger at its next slot
    clock_pass(slot + timedelta(seconds=1))
    run = CycleRun.objects.get(trigger=trigger)
    assert run.outcome == "skipped" and "no scope keywords" in run.reason
    assert not Task.objects.filter(team=ops).exists()

    ScopeKeyword.objects.create(team=ops, keyword="backups")
    clock_pass(slot + timedelta(days=1, seconds=1))
    started = CycleRun.objects.filter(trigger=trigger, outcome="started").get()
    assert started.topics == ["backups"] and started.task.options["subagent"] == "scout"

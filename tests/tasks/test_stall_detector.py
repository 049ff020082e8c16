"""The stall detector: a clock job on the leading engine loop, with a fake `now`."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from openhive.chat.models import OutboxMessage
from openhive.core.jobs import registered_jobs
from openhive.org.services import team_spawn
from tasks.jobs import detect_stalls
from tasks.models import Task
from tasks.services import task_enqueue
from teams.models import TeamMessage
from tests.factories import claim

pytestmark = pytest.mark.django_db


@pytest.fixture
def fast(settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "STALL_WARN_SECONDS": 10, "STALL_ERROR_SECONDS": 60}


@pytest.fixture
def ops(main_team):
    team = team_spawn(parent=main_team, name="ops", scope_accepts=["ops"]).team
    Task.objects.all().delete()
    return team


def test_the_stall_detector_is_a_registered_clock_job():
    (job,) = [j for j in registered_jobs() if j.name == "stall-detector"]
    assert job.func is detect_stalls and job.every_seconds == 600


def test_fresh_work_is_not_stalled(fast, ops):
    task_enqueue(team=ops, text="new")
    assert detect_stalls(timezone.now()) == {
        "stalled_warning": 0,
        "stalled_error": 0,
        "stalled_escalated": 0,
    }


def test_old_pending_work_is_a_warning_only(fast, ops, caplog):
    task = task_enqueue(team=ops, text="waiting")
    with caplog.at_level(logging.WARNING, logger="tasks.stalls"):
        stats = detect_stalls(timezone.now() + timedelta(seconds=30))
    assert stats == {"stalled_warning": 1, "stalled_error": 0, "stalled_escalated": 0}
    assert f"task stalled >10s: #{task.pk} team=ops type=delegate" in caplog.text
    assert not TeamMessage.objects.exists()


def test_very_old_work_is_an_error_escalated_once_to_the_parent(fast, ops, main_team, caplog):
    pending = task_enqueue(team=ops, text="never picked up")
    running = task_enqueue(team=ops, text="hangs")
    claim(task_id=running.pk, worker="w")
    later = timezone.now() + timedelta(seconds=120)
    with caplog.at_level(logging.ERROR, logger="tasks.stalls"):
        assert detect_stalls(later) == {
            "stalled_warning": 0,
            "stalled_error": 2,
            "stalled_escalated": 2,
        }
    assert f"#{running.pk} team=ops type=delegate status=running" in caplog.text
    messages = TeamMessage.objects.order_by("id")
    assert [(m.sender.name, m.recipient.name, m.kind) for m in messages] == [
        ("ops", "main", "escalation"),
        ("ops", "main", "escalation"),
    ]
    assert {m.correlation_id for m in messages} == {f"stall:{pending.pk}", f"stall:{running.pk}"}
    # the next run still reports them, but does not escalate again
    assert detect_stalls(later)["stalled_escalated"] == 0
    assert TeamMessage.objects.count() == 2


def test_stalled_work_of_main_reaches_the_chat_that_asked(fast, main_team):
    task_enqueue(team=main_team, text="route this", source_channel="web:alice")
    detect_stalls(timezone.now() + timedelta(seconds=120))
    note = OutboxMessage.objects.get()
    assert note.channel_id == "web:alice" and note.content.startswith("[main] Stalled: Task #")
    # In the chat's history: an escalation about that task, with its status when it was sent.
    assert note.kind == "escalation" and note.message.role == "escalation"
    assert (note.message.task_id, note.message.task_status) == (note.task_id, "pending")

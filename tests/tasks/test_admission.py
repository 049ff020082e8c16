"""Admission units: per-team caps from config.yaml, the org-op lock, claim order, and the
dispatcher's per-team room."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from openhive.core import paths
from openhive.org.services import team_spawn
from tasks.models import OrgOpLock, Task
from tasks.selectors import tasks_admissible, team_cap
from tasks.services import task_admit_running, task_claim_next, task_enqueue
from tests.factories import claim as claim_task

pytestmark = pytest.mark.django_db

P = Task.Priority


def set_cap(name: str, cap: int) -> None:
    config = paths.team_dir(name) / "config.yaml"
    text = config.read_text()
    current = next(line for line in text.splitlines() if "max_concurrent_daily_ops" in line)
    config.write_text(text.replace(current, f"max_concurrent_daily_ops: {cap}"))


@pytest.fixture
def ops(main_team):
    team = team_spawn(parent=main_team, name="ops", scope_accepts=["ops"]).team
    Task.objects.all().delete()
    return team


def claim(team, worker="w", **kwargs):
    return task_claim_next(team_id=team.pk, team_name=team.name, worker=worker, **kwargs)


def lock(team, seconds: float = 60) -> OrgOpLock:
    now = timezone.now()
    return OrgOpLock.objects.create(
        team=team, holder="h", acquired_at=now, expires_at=now + timedelta(seconds=seconds)
    )


def test_cap_comes_from_config_yaml_and_follows_edits(ops):
    assert team_cap("ops") == 5
    set_cap("ops", 2)
    assert team_cap("ops") == 2


def test_a_broken_or_missing_config_falls_back_to_the_default_cap(ops):
    (paths.team_dir("ops") / "config.yaml").write_text("max_concurrent_daily_ops: [oops")
    assert team_cap("ops") == 5
    assert team_cap("no-such-team") == 5


def test_claims_take_the_best_pending_task_first(ops):
    low = task_enqueue(team=ops, text="low", priority=P.LOW)
    high = task_enqueue(team=ops, text="high", priority=P.HIGH)
    normal = task_enqueue(team=ops, text="normal")
    assert [claim(ops).pk for _ in range(3)] == [high.pk, normal.pk, low.pk]
    assert claim(ops) is None


def test_claims_stop_at_the_cap_and_resume_when_a_slot_frees(ops):
    set_cap("ops", 2)
    for i in range(3):
        task_enqueue(team=ops, text=f"t{i}")
    first, second = claim(ops), claim(ops)
    assert first and second and claim(ops) is None  # the third waits; it is not rejected
    assert Task.objects.filter(status="pending").count() == 1
    Task.objects.filter(pk=first.pk).update(status="done")
    assert claim(ops) is not None


def test_a_named_task_is_claimed_only_if_admissible(ops):
    set_cap("ops", 1)
    a, b = task_enqueue(team=ops, text="a"), task_enqueue(team=ops, text="b")
    assert claim(ops, task_id=b.pk).pk == b.pk
    assert claim(ops, task_id=a.pk) is None


def test_an_org_op_lock_blocks_claims_until_it_expires_or_goes(ops):
    task_enqueue(team=ops, text="t")
    held = lock(ops)
    assert claim(ops) is None
    held.delete()
    lock(ops, seconds=-1)  # an expired lock (its holder died) is ignored
    assert claim(ops) is not None


def test_a_claim_records_the_lease(ops, settings):
    task = task_enqueue(team=ops, text="t")
    claimed = claim(ops, worker="host:1")
    assert claimed.pk == task.pk and claimed.status == "running"
    assert claimed.lease_owner == "host:1" and claimed.attempts == 1
    lease = (claimed.lease_expires_at - claimed.started_at).total_seconds()
    assert lease == settings.OPENHIVE["LEASE_SECONDS"]


def test_admit_running_takes_a_slot_or_says_saturated(ops):
    set_cap("ops", 1)
    task = task_admit_running(team=ops, text="q", worker="w", type=Task.Type.QUERY)
    assert task.status == "running" and task.type == "query"
    with pytest.raises(Exception, match="saturated"):
        task_admit_running(team=ops, text="q2", worker="w", type=Task.Type.QUERY)


def test_dispatcher_hands_out_no_more_per_team_than_free_slots(main_team, ops):
    other = team_spawn(parent=main_team, name="web", scope_accepts=["web"]).team
    Task.objects.all().delete()
    set_cap("ops", 2)
    running = task_enqueue(team=ops, text="running")
    claim_task(task_id=running.pk, worker="w")
    ops_tasks = [task_enqueue(team=ops, text=f"o{i}", priority=P.HIGH) for i in range(3)]
    web_tasks = [task_enqueue(team=other, text=f"w{i}") for i in range(2)]
    picked = tasks_admissible(now=timezone.now(), limit=10)
    assert picked == [ops_tasks[0].pk, web_tasks[0].pk, web_tasks[1].pk]


def test_dispatcher_skips_a_team_under_an_org_op(ops):
    task_enqueue(team=ops, text="t")
    lock(ops)
    assert tasks_admissible(now=timezone.now(), limit=10) == []

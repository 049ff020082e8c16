"""Spend by team, task, trigger and day beside the budgets: GET /api/v1/usage and the admin's
usage page."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
import yaml
from django.utils import timezone

from openhive.engine.models import Session
from tasks.models import Task
from teams.config import default_config, write_team_config
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def spend(main_team, openhive_dirs):
    ops = TeamFactory(name="ops", parent=main_team)
    config = default_config("ops", parent="main")
    budgets = config.budgets.model_copy(
        update={"daily_tokens": 50_000, "task_usd": 0.5, "window_tokens": 9000}
    )
    write_team_config(config.model_copy(update={"budgets": budgets}))
    (openhive_dirs / "data" / "config" / "budgets.yaml").write_text(
        yaml.safe_dump({"org": {"daily_usd": 20.0}})
    )
    task = Task.objects.create(
        team=ops, text="work", type="trigger", options={"trigger_id": 4, "trigger": "nightly"}
    )
    Session.objects.create(
        team=ops, task=task, prompt_tokens=1000, completion_tokens=200, cost_usd=Decimal("0.12")
    )
    Session.objects.create(
        team=ops, task=task, prompt_tokens=500, completion_tokens=100, cost_usd=Decimal("0.03")
    )
    Session.objects.create(
        team=main_team, prompt_tokens=300, completion_tokens=0, cost_usd=Decimal("0.01")
    )
    old = Session.objects.create(team=ops, prompt_tokens=9999, completion_tokens=0)
    Session.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(days=3))
    return ops, task


def test_usage_shows_todays_spend_beside_the_budgets(api_client, spend):
    _ops, task = spend
    body = api_client.get("/api/v1/usage").json()
    teams = {row["team"]: row for row in body["teams"]}
    assert teams["ops"]["tokens"] == 1800 and teams["ops"]["usd"] == pytest.approx(0.15)
    assert teams["ops"]["sessions"] == 2
    assert teams["ops"]["budgets"] == {"daily_tokens": 50_000}
    assert teams["main"]["tokens"] == 300 and teams["main"]["budgets"] == {}
    [task_row] = body["tasks"]
    assert task_row["task_id"] == task.pk and task_row["tokens"] == 1800
    assert task_row["budgets"] == {"task_usd": 0.5}
    [trigger] = body["triggers"]
    assert trigger["trigger_id"] == 4 and trigger["trigger"] == "nightly"
    assert trigger["budgets"] == {"window_tokens": 9000}
    assert body["org"]["today"]["tokens"] == 2100
    assert body["org"]["daily_cap"] == {"daily_usd": 20.0}
    assert [d["tokens"] for d in body["days"]] == [2100]


def test_usage_over_a_period_and_for_one_team(api_client, spend):
    since = (timezone.now() - timedelta(days=5)).isoformat()
    body = api_client.get("/api/v1/usage", {"since": since, "team": "ops"}).json()
    assert [row["team"] for row in body["teams"]] == ["ops"]
    assert body["teams"][0]["tokens"] == 1800 + 9999
    assert [d["tokens"] for d in body["days"]] == [9999, 1800]


def test_usage_refuses_a_reversed_period(api_client, spend):
    now = timezone.now()
    response = api_client.get(
        "/api/v1/usage", {"since": now.isoformat(), "until": (now - timedelta(days=1)).isoformat()}
    )
    assert response.status_code == 400 and "since must be before until" in response.json()["detail"]


def test_usage_reads_any_offset_the_schema_accepts_on_both_databases(api_client, spend):
    # PostgreSQL refuses offsets past 16 h; the period is compared in UTC instead.
    body = api_client.get("/api/v1/usage", {"since": "0980-04-18T20:02:47.13+19:23"}).json()
    assert body["teams"][0]["tokens"] >= 1800


def test_usage_refuses_an_instant_that_leaves_the_calendar(api_client, spend):
    response = api_client.get("/api/v1/usage", {"since": "0001-01-01T00:00:00+10:00"})
    assert response.status_code == 422 and "range of dates" in str(response.json()["detail"])


def test_usage_needs_authentication(client, db):
    assert client.get("/api/v1/usage").status_code == 401


def test_the_admin_usage_page_lists_spend_and_budgets(admin_client, spend):
    index = admin_client.get("/admin/engine/").content.decode()
    assert "/admin/usage/" in index
    page = admin_client.get("/admin/usage/").content.decode()
    assert "Usage and budgets" in page
    assert "daily_tokens: 50000" in page and "task_usd: 0.5" in page
    assert "nightly (#4)" in page and "daily_usd: 20.0" in page
    assert admin_client.get("/admin/usage/?since=2000-01-01").status_code == 200
    assert (
        "must not be after"
        in admin_client.get("/admin/usage/?since=2030-01-02&until=2030-01-01").content.decode()
    )

"""The three doors onto trigger management (tool via call_tool, REST, admin) plus `status`:
the same rules everywhere, and an invalid trigger refused with a clear message and nothing
stored."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from tasks.models import Task
from tests.api.factories import UserFactory
from tests.factories import TeamFactory
from triggers.models import TriggerConfig
from trust.services import api_token_create

pytestmark = pytest.mark.django_db

INVALID_CONFIGS = [
    ("schedule", {"cron": "every day at nine"}, "not a valid 5-field cron"),
    ("schedule", {"cron": "0 9 * * * *"}, "not a valid 5-field cron"),
    ("schedule", {}, "cron is required"),
    ("keyword", {"regex": "(unclosed"}, "not a supported regular expression"),
    ("keyword", {}, "exactly one of keywords"),
    ("message", {"pattern": "[a-"}, "not a supported regular expression"),
    ("window", {"watch_window": "* 9 * * *", "max_ticks_per_window": 5}, "max_tokens_per_window"),
    (
        "window",
        {
            "watch_window": "* 9 * * *",
            "tick_interval_ms": 10,
            "max_ticks_per_window": 5,
            "max_tokens_per_window": 9,
        },
        "tick_interval_ms must be at least",
    ),
    ("schedule", {"cron": "0 9 * * *", "keywords": ["x"]}, "unknown config key"),
]


@pytest.fixture
def ctx(main_team, ops) -> ToolContext:
    return ToolContext(team=main_team, source_channel="ws:parent")


def create_args(**overrides) -> dict:
    args = {
        "team": "ops",
        "name": "nightly",
        "type": "schedule",
        "config": {"cron": "0 2 * * *"},
        "task": "Review the logs.",
    }
    return {**args, **overrides}


# -- tools ------------------------------------------------------------------------------------


def test_create_trigger_tool_stores_a_pending_trigger_owned_by_the_callers_chat(ctx):
    result = call_tool(ctx, "create_trigger", create_args())
    assert result["success"], result
    trigger = TriggerConfig.objects.get(name="nightly")
    assert (trigger.state, trigger.source_channel) == ("pending", "ws:parent")
    assert result["trigger"]["when"].startswith("At 02:00 AM")


@pytest.mark.parametrize(("type_", "config", "fragment"), INVALID_CONFIGS)
def test_create_trigger_tool_refuses_invalid_configs(ctx, type_, config, fragment):
    result = call_tool(ctx, "create_trigger", create_args(type=type_, config=config))
    assert result["success"] is False
    assert fragment in result["error"]
    assert not TriggerConfig.objects.exists()


def test_only_the_parent_manages_a_teams_triggers(ctx, ops):
    own = ToolContext(team=ops)
    result = call_tool(own, "create_trigger", create_args())
    assert (result["success"], result["code"]) == (False, "NOT_PARENT")
    stranger = TeamFactory(name="finance")
    other = ToolContext(team=stranger)
    assert call_tool(other, "list_triggers", {"team": "ops"})["code"] == "NOT_PARENT"


def test_a_named_subagent_and_skill_must_exist(ctx, settings):
    result = call_tool(ctx, "create_trigger", create_args(skill="triage"))
    assert 'no skill "triage"' in result["error"] and result["code"] == "INVALID_TRIGGER"
    result = call_tool(ctx, "create_trigger", create_args(subagent="scanner"))
    assert 'unknown subagent "scanner"' in result["error"]
    folder = settings.RUN_DIR / "teams" / "ops" / "subagents"
    folder.mkdir(parents=True)
    (folder / "scanner.md").write_text("---\ndescription: Scans\n---\nYou scan.")
    skills = settings.RUN_DIR / "teams" / "ops" / "skills"
    skills.mkdir(parents=True)
    (skills / "triage.md").write_text("---\nname: triage\ndescription: Sort alerts\n---\nSort.")
    result = call_tool(ctx, "create_trigger", create_args(subagent="scanner", skill="triage"))
    assert result["success"], result
    assert result["trigger"]["subagent"] == "scanner"


def test_enable_list_update_disable_and_test_through_tools(ctx):
    call_tool(ctx, "create_trigger", create_args())
    enabled = call_tool(ctx, "enable_trigger", {"team": "ops", "trigger_name": "nightly"})
    assert enabled["trigger"]["state"] == "active"
    listed = call_tool(ctx, "list_triggers", {"team": "ops"})
    assert [t["name"] for t in listed["triggers"]] == ["nightly"]
    updated = call_tool(
        ctx,
        "update_trigger",
        {"team": "ops", "trigger_name": "nightly", "config": {"cron": "30 3 * * *"}},
    )
    assert updated["trigger"]["config"] == {"cron": "30 3 * * *"}
    refused = call_tool(
        ctx, "update_trigger", {"team": "ops", "trigger_name": "nightly", "config": {"cron": "x"}}
    )
    assert refused["success"] is False and "cron" in refused["error"]
    assert TriggerConfig.objects.get().config == {"cron": "30 3 * * *"}
    tested = call_tool(ctx, "test_trigger", {"team": "ops", "trigger_name": "nightly"})
    assert tested["status"] == "queued" and Task.objects.filter(pk=tested["task_id"]).exists()
    disabled = call_tool(ctx, "disable_trigger", {"team": "ops", "trigger_name": "nightly"})
    assert disabled["trigger"]["state"] == "disabled"


def test_duplicate_names_are_refused_per_team(ctx):
    call_tool(ctx, "create_trigger", create_args())
    again = call_tool(ctx, "create_trigger", create_args())
    assert 'trigger "nightly" already exists for team "ops"' in again["error"]


def test_update_of_an_active_trigger_re_arms_its_clock(ctx, make_trigger):
    from datetime import UTC, datetime

    trigger = make_trigger(name="nightly")
    TriggerConfig.objects.filter(pk=trigger.pk).update(
        next_fire_at=datetime(2030, 1, 1, tzinfo=UTC)
    )
    call_tool(ctx, "update_trigger", {"team": "ops", "trigger_name": "nightly", "task": "New."})
    trigger.refresh_from_db()
    assert trigger.next_fire_at is None and trigger.task == "New."


# -- REST -------------------------------------------------------------------------------------


@pytest.fixture
def api(db, settings) -> Client:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    UserFactory(username="operator", is_staff=True)
    _, token = api_token_create(username="operator", name="tests")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(client: Client, url: str, body: dict | None = None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


def test_rest_create_enable_list_update_test_and_disable(api, ops):
    created = post(api, "/api/v1/triggers", create_args(type="window", config=WINDOW))
    assert created.status_code == 201, created.content
    assert created.json()["overlap_policy"] == "always-skip"
    assert post(api, "/api/v1/triggers/ops/nightly/enable").json()["state"] == "active"
    rows = api.get("/api/v1/triggers?team=ops").json()
    assert [r["name"] for r in rows] == ["nightly"]
    patched = api.patch(
        "/api/v1/triggers/ops/nightly",
        json.dumps({"config": {**WINDOW, "max_ticks_per_window": 9}}),
        content_type="application/json",
    )
    assert patched.json()["config"]["max_ticks_per_window"] == 9
    tested = post(api, "/api/v1/triggers/ops/nightly/test")
    assert tested.json()["status"] == "queued"
    disabled = post(api, "/api/v1/triggers/ops/nightly/disable", {"reason": "holiday"})
    assert disabled.json()["disabled_reason"] == "holiday"


WINDOW = {
    "watch_window": "*/5 9-16 * * 1-5",
    "tick_interval_ms": 2000,
    "max_ticks_per_window": 5,
    "max_tokens_per_window": 20000,
}


@pytest.mark.parametrize(("type_", "config", "fragment"), INVALID_CONFIGS)
def test_rest_refuses_invalid_configs_with_a_clear_400(api, ops, type_, config, fragment):
    response = post(api, "/api/v1/triggers", create_args(type=type_, config=config))
    assert response.status_code == 400
    assert fragment in response.json()["detail"]
    assert not TriggerConfig.objects.exists()


def test_rest_errors_for_unknown_team_trigger_and_bad_update(api, make_trigger):
    assert post(api, "/api/v1/triggers", create_args(team="nope")).status_code == 404
    assert post(api, "/api/v1/triggers/ops/nope/enable").status_code == 404
    make_trigger(name="nightly")
    bad = api.patch(
        "/api/v1/triggers/ops/nightly",
        json.dumps({"timezone": "Mars/Base"}),
        content_type="application/json",
    )
    assert bad.status_code == 400 and "timezone" in bad.json()["detail"]
    assert TriggerConfig.objects.get().timezone == ""


# -- admin ------------------------------------------------------------------------------------

ADD_URL = "/admin/triggers/triggerconfig/add/"


def admin_form(ops, **overrides) -> dict:
    data = {
        "team": ops.pk,
        "name": "nightly",
        "type": "schedule",
        "config": json.dumps({"cron": "0 2 * * *"}),
        "task": "Review the logs.",
        "subagent": "",
        "skill": "",
        "failure_threshold": 3,
        "overlap_policy": "skip-then-replace",
        "timezone": "",
        "misfire_policy": "skip",
    }
    return {**data, **overrides}


def test_admin_add_refuses_an_invalid_cron_and_stores_nothing(admin_client, ops):
    response = admin_client.post(ADD_URL, admin_form(ops, config=json.dumps({"cron": "nope"})))
    assert response.status_code == 200
    assert "not a valid 5-field cron" in response.content.decode()
    assert not TriggerConfig.objects.exists()


def test_admin_add_then_enable_and_list_shows_next_fire_in_words(admin_client, ops):
    assert admin_client.post(ADD_URL, admin_form(ops)).status_code == 302
    trigger = TriggerConfig.objects.get()
    assert trigger.state == "pending"
    admin_client.post(
        "/admin/triggers/triggerconfig/",
        {"action": "enable_triggers", "_selected_action": [trigger.pk]},
    )
    trigger.refresh_from_db()
    assert trigger.state == "active"
    page = admin_client.get("/admin/triggers/triggerconfig/").content.decode()
    assert "At 02:00 AM" in page and "arming" in page


def test_admin_test_action_queues_a_run(admin_client, make_trigger):
    trigger = make_trigger(name="nightly")
    admin_client.post(
        "/admin/triggers/triggerconfig/",
        {"action": "test_triggers", "_selected_action": [trigger.pk]},
    )
    assert Task.objects.filter(type=Task.Type.TRIGGER, options__trigger_test=True).count() == 1


def test_status_lists_triggers(make_trigger):
    make_trigger(name="nightly")
    out = StringIO()
    call_command("openhive", "status", stdout=out)
    assert "Triggers:" in out.getvalue()
    assert "ops/nightly [schedule, active] At 09:00 AM" in out.getvalue()


def change_form(trigger: TriggerConfig, **overrides) -> dict:
    data = {
        "config": json.dumps(trigger.config),
        "task": trigger.task,
        "subagent": "",
        "skill": "",
        "failure_threshold": trigger.failure_threshold,
        "overlap_policy": trigger.overlap_policy,
        "timezone": "",
        "misfire_policy": trigger.misfire_policy,
    }
    return {**data, **overrides}


def test_admin_change_updates_and_re_arms_an_active_trigger(admin_client, make_trigger):
    from datetime import UTC, datetime

    trigger = make_trigger(name="nightly")
    TriggerConfig.objects.filter(pk=trigger.pk).update(
        next_fire_at=datetime(2030, 1, 1, tzinfo=UTC)
    )
    url = f"/admin/triggers/triggerconfig/{trigger.pk}/change/"
    response = admin_client.post(url, change_form(trigger, task="Review and summarise."))
    assert response.status_code == 302, response.content.decode()[:2000]
    trigger.refresh_from_db()
    assert trigger.task == "Review and summarise." and trigger.next_fire_at is None
    assert admin_client.get(url).status_code == 200


def test_admin_change_refuses_an_invalid_timezone_and_keeps_the_row(admin_client, make_trigger):
    trigger = make_trigger(name="nightly")
    url = f"/admin/triggers/triggerconfig/{trigger.pk}/change/"
    response = admin_client.post(url, change_form(trigger, timezone="Nowhere/City"))
    assert response.status_code == 200
    assert "timezone" in response.content.decode() and "is unknown" in response.content.decode()
    trigger.refresh_from_db()
    assert trigger.timezone == ""

"""A schedule asked for in chat: the main agent sets it up for a team below it, the clock fires
it, and what the run asks to say (or an overlap it hit) reaches the person who asked, in the
topic they asked in, with the team's name."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async

from openhive.chat.models import OutboxMessage, Topic
from openhive.chat.turn import ROUTING_TOOLS, TRIGGER_TOOLS, TRUST_TOOLS
from openhive.clock import EngineLoop
from openhive.core import paths
from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from tasks.models import Task
from tasks.runner import run_task
from teams.agent import agent_spec_for
from teams.config import default_config, write_team_config
from teams.services import team_workspace_scaffold
from tests.chat.conftest import close_db_connections, connect, drain, receive_until
from tests.factories import TeamFactory
from triggers.models import TriggerConfig, TriggerEvent
from triggers.services import trigger_fire
from trust.services import api_token_create

__all__ = ["close_db_connections"]  # a fixture, shared with the chat tests

ASK = "check the disks every morning at 9 and tell me if one is over 80 %"
DISK_TASK = "Check the disk usage of every server; tell me if one is over 80 %."
REPORT = "Disk /var on web-1 is at 91 % (over 80 %)."
CREATE = {
    "team": "ops",
    "name": "disk-check",
    "type": "schedule",
    "config": {"cron": "0 9 * * *"},
    "task": DISK_TASK,
}


def chat_script() -> list[dict]:
    """The main agent creates then arms the trigger; the ops run answers with the notify
    block only if its task told it the contract."""
    return [
        {
            "when": {"team": "main", "last": "user", "matches": "disks every morning"},
            "reply": {"tool_calls": [{"name": "create_trigger", "arguments": CREATE}]},
        },
        {
            "when": {"team": "main", "last": "tool", "tool": "create_trigger"},
            "reply": {
                "tool_calls": [
                    {
                        "name": "enable_trigger",
                        "arguments": {"team": "ops", "trigger_name": "disk-check"},
                    }
                ]
            },
        },
        {
            "when": {"team": "main", "last": "tool", "tool": "enable_trigger"},
            "reply": {"content": "Done: ops checks the disks every day at 09:00."},
        },
        {
            "when": {"team": "ops", "matches": "json:notify"},
            "reply": {"content": f'{REPORT}\n\n```json:notify\n{{"notify": true}}\n```'},
        },
        {"when": {}, "reply": {"content": "the notify contract was never given"}},
    ]


@pytest.fixture
def ops(main_team):
    team = TeamFactory(name="ops", parent=main_team, description="Operations")
    team_workspace_scaffold(paths.team_dir("ops"))
    write_team_config(default_config("ops", parent="main"))
    return team


@pytest.fixture
def alice(django_user_model):
    user = django_user_model.objects.create_user(username="alice", password="pw-alice-123")
    return user, api_token_create(username="alice")[1]


def engine(clock) -> EngineLoop:
    # Tasks stay queued: the test runs them itself (run_task), when it chooses.
    return EngineLoop(enqueue=lambda *_handed: None, clock=clock, slots=0)


@pytest.mark.django_db(transaction=True)
async def test_a_schedule_asked_for_in_chat_fires_and_its_notification_reaches_the_socket(
    ops, alice, clock, scripted_provider, close_db_connections
):
    user, token = alice
    scripted_provider(chat_script())
    socket = await connect(f"/ws/chat/?token={token}")
    await receive_until(socket, "topic_list")
    await socket.send_json_to({"type": "message", "content": ASK})
    seen = await receive_until(socket, "response")
    calls = [m["name"] for m in seen if m.get("event") == "tool_call"]
    assert calls == ["create_trigger", "enable_trigger"]
    topic_id = seen[-1]["topic_id"]

    trigger = await TriggerConfig.objects.select_related("team").aget(name="disk-check")
    assert (trigger.team.name, trigger.state, trigger.task) == ("ops", "active", DISK_TASK)
    assert trigger.source_channel == f"ws:user:{user.pk}"
    assert (trigger.owner, trigger.owner_topic_id) == ("user:alice", topic_id)

    loop = engine(clock)
    await sync_to_async(loop.tick)()  # 08:58: arms the 09:00 slot, fires nothing
    assert not await Task.objects.filter(type=Task.Type.TRIGGER).aexists()
    clock.now = datetime(2026, 11, 20, 9, 0, 0, 100_000, tzinfo=UTC)
    await sync_to_async(loop.tick)()
    run = await Task.objects.aget(type=Task.Type.TRIGGER)
    assert (run.source_channel, run.topic_id) == (trigger.source_channel, topic_id)
    assert "```json:notify" in run.text and DISK_TASK in run.text

    # Next morning the first run is still queued: the slot is skipped and the owner is told.
    clock.now = datetime(2026, 11, 21, 9, 0, 0, 100_000, tzinfo=UTC)
    await sync_to_async(loop.tick)()
    assert await TriggerEvent.objects.filter(outcome="skipped").acount() == 1
    [alert] = (await receive_until(socket, "notification"))[-1:]
    assert alert["team"] == "ops" and alert["topic_id"] == topic_id
    assert "ops/disk-check" in alert["content"] and "skipped a firing" in alert["content"]

    assert await sync_to_async(run_task)(run.pk) == "done"
    [note] = (await receive_until(socket, "notification"))[-1:]
    # The frame names the team beside the text (no "[ops]" tag repeating it).
    assert {k: note[k] for k in ("type", "team", "content", "topic_id", "topic_name")} == {
        "type": "notification",
        "team": "ops",
        "content": REPORT,
        "topic_id": topic_id,
        "topic_name": seen[-1]["topic_name"],
    }
    assert await drain(socket) == []
    assert not await OutboxMessage.objects.filter(delivered_at__isnull=True).aexists()
    await socket.disconnect()


# -- the tool door, as the main agent's chat turn calls it --------------------------------------


@pytest.fixture
def chat_ctx(main_team, ops) -> ToolContext:
    topic = Topic.objects.create(channel_id="ws:user:7", name="Disks")
    return ToolContext(
        team=main_team, source_channel="ws:user:7", topic_id=topic.pk, actor="user:bob"
    )


@pytest.mark.django_db
def test_main_manages_triggers_of_its_descendants_only(chat_ctx, main_team, ops):
    TeamFactory(name="disks", parent=ops)
    outsider_root = TeamFactory(name="lab", parent=None)
    TeamFactory(name="finance", parent=outsider_root)

    made = call_tool(chat_ctx, "create_trigger", {**CREATE, "team": "disks"})
    assert made["success"], made
    listed = call_tool(chat_ctx, "list_triggers", {"team": "disks"})
    assert [(t["name"], t["owner"]) for t in listed["triggers"]] == [("disk-check", "user:bob")]

    for team in ("finance", "lab", "main"):
        refused = call_tool(chat_ctx, "create_trigger", {**CREATE, "team": team})
        assert (refused["success"], refused["code"]) == (False, "NOT_PARENT"), team
        assert "not below" in refused["error"]
    # A team cannot arm itself, nor reach up to its parent.
    own = ToolContext(team=ops, source_channel="ws:user:7")
    for team in ("ops", "main"):
        assert call_tool(own, "create_trigger", {**CREATE, "team": team})["code"] == "NOT_PARENT"
    assert TriggerConfig.objects.count() == 1


@pytest.mark.django_db
def test_a_bad_cron_from_chat_is_refused_with_a_clear_error_and_nothing_is_stored(chat_ctx):
    result = call_tool(
        chat_ctx, "create_trigger", {**CREATE, "config": {"cron": "every morning at 9"}}
    )
    assert result["success"] is False and result["code"] == "INVALID_TRIGGER"
    assert "not a valid 5-field cron expression" in result["error"]
    assert "minute hour day-of-month month day-of-week" in result["error"]
    assert not TriggerConfig.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_notification_for_an_offline_owner_waits_in_the_outbox_for_their_topic(
    chat_ctx, scripted_provider
):
    scripted_provider(chat_script())
    assert call_tool(chat_ctx, "create_trigger", CREATE)["success"]
    assert call_tool(chat_ctx, "test_trigger", {"team": "ops", "trigger_name": "disk-check"})[
        "success"
    ]
    run = Task.objects.get(type=Task.Type.TRIGGER)
    assert run_task(run.pk) == "done"
    item = OutboxMessage.objects.get()
    assert (item.channel_id, item.topic_id, item.team_name) == (
        "ws:user:7",
        chat_ctx.topic_id,
        "ops",
    )
    assert item.content == f"[ops] {REPORT}" and item.delivered_at is None


@pytest.mark.django_db
def test_a_trigger_made_outside_chat_alerts_only_the_operator(make_trigger, caplog):
    trigger = make_trigger(name="nightly")
    assert (trigger.owner, trigger.owner_topic_id, trigger.source_channel) == ("", None, "")
    first = trigger_fire(trigger_id=trigger.pk, event_key="slot-1")
    assert first.outcome == "fired"
    assert trigger_fire(trigger_id=trigger.pk, event_key="slot-2").outcome == "skipped"
    trigger.refresh_from_db()
    assert "skipped a firing" in trigger.last_alert
    assert "skipped a firing" in caplog.text
    assert not OutboxMessage.objects.exists()


@pytest.mark.django_db
def test_skip_then_replace_overlap_alerts_reach_the_owners_topic(chat_ctx):
    assert call_tool(chat_ctx, "create_trigger", CREATE)["success"]
    assert call_tool(chat_ctx, "enable_trigger", {"team": "ops", "trigger_name": "disk-check"})[
        "success"
    ]
    trigger = TriggerConfig.objects.get(name="disk-check")
    first = trigger_fire(trigger_id=trigger.pk, event_key="slot-1")
    assert trigger_fire(trigger_id=trigger.pk, event_key="slot-2").outcome == "skipped"
    third = trigger_fire(trigger_id=trigger.pk, event_key="slot-3")
    assert (third.outcome, third.replaced_task_id) == ("replaced", first.task_id)
    alerts = list(OutboxMessage.objects.order_by("id"))
    assert [(a.channel_id, a.topic_id, a.team_name) for a in alerts] == [
        ("ws:user:7", chat_ctx.topic_id, "ops")
    ] * 2
    assert "skipped a firing" in alerts[0].content
    assert f"replaced task #{first.task_id}" in alerts[1].content
    assert all(a.content.startswith("trigger ops/disk-check:") for a in alerts)


@pytest.mark.django_db
def test_the_main_agents_chat_turn_gets_the_trigger_tools_and_the_activation_rule(
    main_team, scripted_provider
):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    spec = agent_spec_for(main_team, only_tools=[*ROUTING_TOOLS, *TRUST_TOOLS, *TRIGGER_TOOLS])
    offered = {s.name for s in spec.tools}
    assert set(TRIGGER_TOOLS) <= offered and len(TRIGGER_TOOLS) == 6
    prompt = "\n".join(str(m["content"]) for m in spec.system_messages)
    assert "# Activation: what wakes the work" in prompt
    assert "`schedule`" in prompt and "`window`" in prompt and "`keyword`" in prompt

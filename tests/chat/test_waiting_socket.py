"""A waiting task's question over the real chat socket, and the answer typed in its topic."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from openhive.chat.models import Message, Topic
from openhive.engine.models import Session
from openhive.org.services import team_spawn
from tasks.models import Task, UserQuestion
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.models import Team
from tests.chat.conftest import connect, receive_until
from tests.tasks.test_waiting import RAN, risky_tool  # noqa: F401 (a fixture)
from trust.services import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)


def _paused_task(username: str, *, staff: bool, scripted_provider, django_user_model):
    user = django_user_model.objects.create_user(
        username=username, password="pw-123-abc", is_staff=staff
    )
    token = api_token_create(username=username)[1]
    main = Team.objects.get(name="main")
    ops = team_spawn(parent=main, name="ops", description="Operations").team
    Team.objects.filter(pk=ops.pk).update(bootstrapped=True)
    ops.tasks.filter(type=Task.Type.BOOTSTRAP).update(status=Task.Status.DONE)
    scripted_provider(
        [
            {
                "when": {"team": "ops", "last": "user"},
                "reply": {
                    "tool_calls": [{"name": "ask_user", "arguments": {"question": "Which disk?"}}]
                },
            },
            {"when": {"team": "ops", "last": "tool"}, "reply": {"content": "Checked."}},
            {"when": {}, "reply": {"content": "main agent turn"}},
        ]
    )
    channel = f"ws:user:{user.pk}"
    topic = Topic.objects.create(channel_id=channel, name="Disks")
    task = task_enqueue(team=ops, text="Check the disk", source_channel=channel, topic_id=topic.pk)
    assert run_task(task.pk) == "waiting_for_user"
    connections.close_all()
    return token, topic, task


async def test_the_question_arrives_as_a_frame_and_the_next_message_answers_it(
    main_team, scripted_provider, django_user_model, close_db_connections
):
    token, topic, task = await sync_to_async(_paused_task)(
        "alice",
        staff=False,
        scripted_provider=scripted_provider,
        django_user_model=django_user_model,
    )
    communicator = await connect(f"/ws/chat/?token={token}")
    seen = await receive_until(communicator, "notification")
    frame = seen[-1]
    assert frame["kind"] == "question" and frame["task_id"] == task.pk
    assert frame["question"]["text"] == "Which disk?" and frame["team"] == "ops"
    assert frame["topic_id"] == topic.pk
    await communicator.send_json_to({"type": "message", "content": "sdb", "topic_id": topic.pk})
    seen = await receive_until(communicator, "response")
    assert seen[0]["type"] == "ack"
    assert f"task #{task.pk} goes on" in seen[-1]["content"]
    await communicator.disconnect()
    question = await UserQuestion.objects.aget(task_id=task.pk)
    assert question.state == "answered" and question.answer == "sdb"
    assert question.decided_by == "alice" and question.decided_via == "chat"
    # The answer was not a turn of the main agent; the reply is in the topic's history.
    assert not await Session.objects.filter(team__name="main").aexists()
    assert await Message.objects.filter(topic=topic, role="assistant").acount() == 1
    assert (await Task.objects.aget(pk=task.pk)).status == "pending"
    assert await sync_to_async(_run_and_close)(task.pk) == "done"


def _run_and_close(task_id: int) -> str:
    try:
        return run_task(task_id)
    finally:
        connections.close_all()


def _gated_task(scripted_provider, django_user_model):
    from teams.config import TeamConfig, load_team_config, write_team_config

    user = django_user_model.objects.create_user(
        username="olga", password="pw-123-abc", is_staff=True
    )
    token = api_token_create(username="olga")[1]
    main = Team.objects.get(name="main")
    ops = team_spawn(parent=main, name="ops", description="Operations").team
    Team.objects.filter(pk=ops.pk).update(bootstrapped=True)
    ops.tasks.filter(type=Task.Type.BOOTSTRAP).update(status=Task.Status.DONE)
    config = load_team_config("ops").model_dump()
    write_team_config(TeamConfig.model_validate({**config, "require_approval": ["zz_reboot"]}))
    scripted_provider(
        [
            {
                "when": {"team": "ops", "last": "user"},
                "reply": {"tool_calls": [{"name": "zz_reboot", "arguments": {"target": "db1"}}]},
            },
            {"when": {"team": "ops", "last": "tool"}, "reply": {"content": "Rebooted."}},
        ]
    )
    channel = f"ws:user:{user.pk}"
    topic = Topic.objects.create(channel_id=channel, name="Ops")
    task = task_enqueue(team=ops, text="Reboot db1", source_channel=channel, topic_id=topic.pk)
    assert run_task(task.pk) == "waiting_for_approval"
    connections.close_all()
    return token, topic, task


@pytest.mark.usefixtures("risky_tool")
async def test_an_operator_approves_over_the_socket_and_the_call_runs_once(
    main_team, scripted_provider, django_user_model, close_db_connections
):
    token, topic, task = await sync_to_async(_gated_task)(scripted_provider, django_user_model)
    communicator = await connect(f"/ws/chat/?token={token}")
    frame = (await receive_until(communicator, "notification"))[-1]
    assert frame["kind"] == "approval" and frame["question"]["tool"] == "zz_reboot"
    assert frame["question"]["arguments"] == {"target": "db1"}
    await communicator.send_json_to({"type": "message", "content": "approve", "topic_id": topic.pk})
    seen = await receive_until(communicator, "response")
    assert "approved" in seen[-1]["content"]
    await communicator.disconnect()
    audit = await UserQuestion.objects.aget(task_id=task.pk)
    assert (audit.state, audit.decided_by, audit.decided_via) == ("approved", "olga", "chat")
    assert await sync_to_async(_run_and_close)(task.pk) == "done"
    assert RAN == ["db1"]

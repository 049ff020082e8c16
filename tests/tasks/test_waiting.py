"""Tasks that wait for a person: ask_user and approvals of risky calls, end to end with the
scripted provider (pause, answer or decide, resume on another worker, timeouts)."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone
from pydantic import BaseModel, ConfigDict

from openhive.chat.models import OutboxMessage, Topic
from openhive.core import registry
from openhive.core.errors import Conflict, DomainError
from openhive.core.registry import tool
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.org.services import team_spawn
from tasks.models import Task, UserQuestion
from tasks.runner import run_next_task, run_task
from tasks.services import task_cancel, task_enqueue
from tasks.services.waiting import (
    chat_answer,
    questions_expire,
    task_answer,
    task_decide_approval,
)
from teams.config import TeamConfig, load_team_config, write_team_config
from teams.models import Team
from tests.factories import claim

pytestmark = pytest.mark.django_db(transaction=True)

ASK = {
    "when": {"team": "ops", "last": "user"},
    "reply": {
        "content": "",
        "tool_calls": [
            {
                "name": "ask_user",
                "arguments": {"question": "Which disk?", "options": ["sda", "sdb"]},
            }
        ],
    },
}
AFTER_ANSWER = {
    "when": {"team": "ops", "last": "tool", "tool": "ask_user", "matches": "sdb"},
    "reply": {"content": "Checked sdb: 40% used."},
}


@pytest.fixture
def ops(main_team):
    team = team_spawn(parent=main_team, name="ops", description="Operations").team
    Team.objects.filter(pk=team.pk).update(bootstrapped=True)
    team.tasks.filter(type=Task.Type.BOOTSTRAP).update(status=Task.Status.DONE)
    return team


def configure(team: Team, **changes) -> None:
    config = load_team_config(team.name)
    write_team_config(TeamConfig.model_validate({**config.model_dump(), **changes}))


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target: str = ""


RAN: list[str] = []


@pytest.fixture
def risky_tool():
    before = set(registry._REGISTRY)
    RAN.clear()

    @tool(name="zz_reboot", description="Reboot a host", args=_NoArgs)
    def reboot(ctx, args):
        RAN.append(args.target)
        return {"rebooted": args.target}

    yield
    for name in set(registry._REGISTRY) - before:
        del registry._REGISTRY[name]


def ask(ops, scripted_provider, *, channel: str = "web:alice", topic=None) -> Task:
    scripted_provider([ASK, AFTER_ANSWER, {"when": {}, "reply": {"content": "fallback"}}])
    task = task_enqueue(
        team=ops,
        text="Check the disk",
        source_channel=channel,
        topic_id=topic.pk if topic else None,
    )
    assert run_task(task.pk) == Task.Status.WAITING_FOR_USER
    return Task.objects.get(pk=task.pk)


def in_fresh_thread(func):
    """Run `func` as another worker would: its own thread, its own database connection."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = func()
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(60)
    return box.get("value")


# --- ask_user ----------------------------------------------------------------------------------


def test_ask_user_pauses_the_task_and_frees_its_worker_slot(ops, scripted_provider):
    configure(ops, max_concurrent_daily_ops=1)
    task = ask(ops, scripted_provider)
    assert task.status == "waiting_for_user" and task.stop_reason == "waiting"
    assert task.lease_owner == "" and task.lease_expires_at is None and task.attempts == 0
    session = Session.objects.get(task=task)
    assert session.stop_reason == "waiting" and session.error == ""
    question = UserQuestion.objects.get(task=task)
    assert question.kind == "question" and question.state == "pending"
    assert question.text == "Which disk?" and question.options == ["sda", "sdb"]
    assert question.session_id == session.pk and question.expires_at is not None
    # The team's one slot is free: another task of the team can be claimed meanwhile.
    other = task_enqueue(team=ops, text="something else")
    assert claim(task_id=other.pk, worker="w2") is not None


def test_the_question_reaches_the_chat_it_came_from(ops, scripted_provider):
    topic = Topic.objects.create(channel_id="web:alice", name="Disks")
    task = ask(ops, scripted_provider, topic=topic)
    note = OutboxMessage.objects.get(kind="question")
    assert note.channel_id == "web:alice" and note.topic_id == topic.pk
    assert note.task_id == task.pk and note.team_name == "ops"
    assert "Which disk?" in note.content and "sda, sdb" in note.content
    assert note.data["options"] == ["sda", "sdb"] and note.data["task_id"] == task.pk
    assert note.data["team"] == "ops" and note.data["kind"] == "question"


def test_a_paused_task_is_ignored_by_the_reaper_and_the_stall_detector(ops, scripted_provider):
    from tasks.jobs import detect_stalls
    from tasks.services import tasks_reap_expired_leases

    task = ask(ops, scripted_provider)
    later = timezone.now() + timedelta(days=3)
    assert tasks_reap_expired_leases(now=later) == {"requeued": 0, "failed": 0}
    assert detect_stalls(later)["stalled_error"] == 0
    assert Task.objects.get(pk=task.pk).status == "waiting_for_user"


def test_the_answer_resumes_the_session_on_another_worker_and_the_task_finishes(
    ops, scripted_provider
):
    task = ask(ops, scripted_provider)
    paused = Session.objects.get(task=task)
    task_answer(task_id=task.pk, answer="sdb", by="alice", via="api")
    resumed = Task.objects.get(pk=task.pk)
    assert resumed.status == "pending" and resumed.priority == Task.Priority.HIGH
    # The first worker is gone; a new one (its own thread and connection) pulls the task.
    assert in_fresh_thread(lambda: run_next_task("worker-2")) == "done"
    task = Task.objects.get(pk=task.pk)
    assert task.status == "done" and task.result == "Checked sdb: 40% used."
    second = Session.objects.filter(task=task).exclude(pk=paused.pk).get()
    assert second.spec_options["resumed_from"] == paused.pk
    assert second.stop_reason == "completed"
    # The model saw the conversation and the answer as ask_user's result.
    exchange = LlmExchange.objects.get(session=second)
    tool_result = [m for m in exchange.request_messages if m.get("role") == "tool"][-1]
    assert json.loads(tool_result["content"])["answer"] == "sdb"
    assert any(m.get("content") == "Check the disk" for m in exchange.request_messages)
    question = UserQuestion.objects.get(task=task)
    assert question.state == "answered" and question.decided_by == "alice"
    assert question.decided_via == "api" and question.resumed_at is not None


def test_an_answer_is_given_once_even_if_the_task_runs_again(ops, scripted_provider):
    task = ask(ops, scripted_provider)
    task_answer(task_id=task.pk, answer="sdb", by="alice", via="api")
    assert run_task(task.pk) == "done"
    from tasks.services.waiting import resume_for

    assert resume_for(Task.objects.get(pk=task.pk)) is None


def test_bad_answers_are_refused_and_change_nothing(ops, scripted_provider):
    task = ask(ops, scripted_provider)
    with pytest.raises(DomainError, match="must not be empty"):
        task_answer(task_id=task.pk, answer="  ", by="alice", via="api")
    with pytest.raises(DomainError, match="one of: sda, sdb"):
        task_answer(task_id=task.pk, answer="sdc", by="alice", via="api")
    with pytest.raises(Conflict, match="waits for an answer"):
        task_decide_approval(task_id=task.pk, decision="approve", reason="", by="x", via="api")
    assert Task.objects.get(pk=task.pk).status == "waiting_for_user"
    assert UserQuestion.objects.get(task=task).state == "pending"
    other = task_enqueue(team=ops, text="not waiting")
    with pytest.raises(Conflict, match="not waiting"):
        task_answer(task_id=other.pk, answer="sdb", by="alice", via="api")


def test_an_option_answer_ignores_case(ops, scripted_provider):
    task = ask(ops, scripted_provider)
    assert task_answer(task_id=task.pk, answer="SDB", by="a", via="api").answer == "sdb"


def test_cancelling_a_waiting_task_closes_its_question(ops, scripted_provider):
    task = ask(ops, scripted_provider)
    task_cancel(task_id=task.pk, reason="not needed")
    assert Task.objects.get(pk=task.pk).status == "cancelled"
    assert UserQuestion.objects.get(task=task).state == "closed"


def test_ask_user_is_not_offered_outside_a_task_session(ops, scripted_provider):
    from teams.agent import run_team_session

    scripted_provider([ASK, {"when": {}, "reply": {"content": "no"}}])
    outcome = run_team_session(ops, "Check the disk", kind="chat")
    exchange = LlmExchange.objects.filter(session_id=outcome.session_id).first()
    assert "ask_user" not in exchange.tools
    assert outcome.pause is None


# --- timeouts (the clock job, with a clock moved forward) --------------------------------------


def test_the_timeout_gives_the_configured_default_and_the_task_resumes(ops, scripted_provider):
    configure(ops, ask_user={"timeout_seconds": 60, "default": "sdb"})
    task = ask(ops, scripted_provider)
    assert questions_expire(now=timezone.now() + timedelta(seconds=30)) == {
        "questions_defaulted": 0,
        "questions_failed": 0,
    }
    stats = questions_expire(now=timezone.now() + timedelta(seconds=61))
    assert stats == {"questions_defaulted": 1, "questions_failed": 0}
    question = UserQuestion.objects.get(task=task)
    assert question.state == "defaulted" and question.answer == "sdb"
    assert question.decided_by == "timeout"
    assert run_task(task.pk) == "done"
    assert Task.objects.get(pk=task.pk).result == "Checked sdb: 40% used."


def test_the_timeout_without_a_default_fails_the_task_with_a_clear_reason(ops, scripted_provider):
    configure(ops, ask_user={"timeout_seconds": 7200})
    task = ask(ops, scripted_provider)
    stats = questions_expire(now=timezone.now() + timedelta(hours=3))
    assert stats == {"questions_defaulted": 0, "questions_failed": 1}
    task = Task.objects.get(pk=task.pk)
    assert task.status == "failed" and "no answer from the user within 3.0 h" in task.result
    assert UserQuestion.objects.get(task=task).state == "expired"
    # The chat that asked hears of the failure like any other result.
    assert OutboxMessage.objects.filter(kind="result", task_id=task.pk).exists()


def test_the_ask_user_config_is_validated(ops):
    with pytest.raises(ValueError, match="timeout_seconds"):
        TeamConfig.model_validate({"name": "x", "ask_user": {"timeout_seconds": 0}})
    with pytest.raises(ValueError, match=r"unknown|Extra"):
        TeamConfig.model_validate({"name": "x", "ask_user": {"defualt": "yes"}})


# --- approvals ---------------------------------------------------------------------------------

REBOOT = {
    "when": {"team": "ops", "last": "user"},
    "reply": {"tool_calls": [{"name": "zz_reboot", "arguments": {"target": "db1"}}]},
}


def gated_task(ops, scripted_provider) -> Task:
    configure(ops, require_approval=["zz_re*"])
    scripted_provider(
        [
            REBOOT,
            {
                "when": {"last": "tool", "tool": "zz_reboot", "matches": "APPROVAL_DENIED"},
                "reply": {"content": "Not rebooted: denied."},
            },
            {
                "when": {"last": "tool", "tool": "zz_reboot", "matches": "rebooted"},
                "reply": {"content": "db1 rebooted."},
            },
        ]
    )
    task = task_enqueue(team=ops, text="Reboot db1", source_channel="web:alice")
    assert run_task(task.pk) == Task.Status.WAITING_FOR_APPROVAL
    return task


def test_a_gated_call_does_not_run_and_waits_for_approval(ops, scripted_provider, risky_tool):
    task = gated_task(ops, scripted_provider)
    assert RAN == [] and not ToolCall.objects.filter(tool="zz_reboot").exists()
    request = UserQuestion.objects.get(task=task)
    assert request.kind == "approval" and request.tool == "zz_reboot"
    assert request.arguments == {"target": "db1"}
    note = OutboxMessage.objects.get(kind="approval")
    assert "zz_reboot" in note.content and note.data["tool"] == "zz_reboot"


def test_a_denied_call_is_a_failed_tool_result_the_model_sees(ops, scripted_provider, risky_tool):
    task = gated_task(ops, scripted_provider)
    task_decide_approval(task_id=task.pk, decision="deny", reason="not now", by="bob", via="api")
    assert run_task(task.pk) == "done"
    assert Task.objects.get(pk=task.pk).result == "Not rebooted: denied."
    assert RAN == []
    second = Session.objects.filter(task=task).order_by("-id").first()
    result = [
        m for m in LlmExchange.objects.get(session=second).request_messages if m["role"] == "tool"
    ][-1]
    body = json.loads(result["content"])
    assert body["success"] is False and "not now" in body["error"]
    audit = UserQuestion.objects.get(task=task)
    assert (audit.state, audit.decided_by, audit.reason) == ("denied", "bob", "not now")
    assert audit.decided_at is not None


def test_an_approved_call_runs_once_when_the_session_resumes(ops, scripted_provider, risky_tool):
    task = gated_task(ops, scripted_provider)
    task_decide_approval(task_id=task.pk, decision="approve", reason="", by="bob", via="api")
    assert in_fresh_thread(lambda: run_next_task("worker-2")) == "done"
    assert Task.objects.get(pk=task.pk).result == "db1 rebooted."
    assert RAN == ["db1"] and ToolCall.objects.filter(tool="zz_reboot").count() == 1
    assert UserQuestion.objects.get(task=task).state == "approved"


def test_a_bad_decision_is_refused(ops, scripted_provider, risky_tool):
    task = gated_task(ops, scripted_provider)
    with pytest.raises(DomainError, match="approve"):
        task_decide_approval(task_id=task.pk, decision="maybe", reason="", by="b", via="api")
    with pytest.raises(Conflict, match="approval decision"):
        task_answer(task_id=task.pk, answer="yes", by="b", via="api")
    assert UserQuestion.objects.get(task=task).state == "pending"


def test_a_gated_call_outside_a_task_is_refused_not_run(ops, scripted_provider, risky_tool):
    from teams.agent import run_team_session

    configure(ops, require_approval=["zz_reboot"])
    scripted_provider([REBOOT, {"when": {"last": "tool"}, "reply": {"content": "could not"}}])
    outcome = run_team_session(ops, "Reboot db1", kind="chat")
    assert outcome.ok and RAN == []
    assert outcome.pause is None


# --- chat answers ------------------------------------------------------------------------------


def test_the_next_message_in_the_topic_answers_the_oldest_question(ops, scripted_provider):
    topic = Topic.objects.create(channel_id="web:alice", name="Disks")
    task = ask(ops, scripted_provider, topic=topic)
    assert (
        chat_answer(
            channel_id="web:other", topic_id=topic.pk, text="sdb", sender="x", operator=False
        )
        is None
    )
    reply = chat_answer(
        channel_id="web:alice", topic_id=topic.pk, text="sdb", sender="alice", operator=False
    )
    assert "task #" in reply and Task.objects.get(pk=task.pk).status == "pending"
    assert UserQuestion.objects.get(task=task).decided_via == "chat"


def test_an_operator_approves_in_chat(ops, scripted_provider, risky_tool):
    topic = Topic.objects.create(channel_id="web:alice", name="Ops")
    task = gated_task(ops, scripted_provider)
    Task.objects.filter(pk=task.pk).update(topic=topic)
    UserQuestion.objects.filter(task=task).update(topic=topic)
    # Someone who is not an operator: an ordinary message, no decision.
    assert (
        chat_answer(
            channel_id="web:alice", topic_id=topic.pk, text="approve", sender="a", operator=False
        )
        is None
    )
    reply = chat_answer(
        channel_id="web:alice",
        topic_id=topic.pk,
        text="deny: too risky today",
        sender="alice",
        operator=True,
    )
    assert "denied" in reply
    audit = UserQuestion.objects.get(task=task)
    assert (audit.state, audit.reason, audit.decided_via) == ("denied", "too risky today", "chat")


def test_calls_after_the_question_run_on_resume_and_a_second_question_pauses_again(
    ops, scripted_provider, risky_tool
):
    two = [
        {"name": "ask_user", "arguments": {"question": "First?"}},
        {"name": "zz_reboot", "arguments": {"target": "web1"}},
        {"name": "ask_user", "arguments": {"question": "Second?"}},
    ]
    scripted_provider(
        [
            {"when": {"team": "ops", "last": "user"}, "reply": {"tool_calls": two}},
            {"when": {"last": "tool", "tool": "ask_user"}, "reply": {"content": "all done"}},
        ]
    )
    task = task_enqueue(team=ops, text="Two questions", source_channel="web:alice")
    assert run_task(task.pk) == "waiting_for_user"
    task_answer(task_id=task.pk, answer="one", by="alice", via="api")
    # The resumed run gives the first answer, runs the reboot, then waits on the second
    # question without a model call in between.
    assert run_task(task.pk) == "waiting_for_user" and RAN == ["web1"]
    second = UserQuestion.objects.filter(task=task, state="pending").get()
    assert second.text == "Second?"
    task_answer(task_id=task.pk, answer="two", by="alice", via="api")
    assert run_task(task.pk) == "done" and RAN == ["web1"]
    last = Session.objects.filter(task=task).order_by("-id").first()
    request = LlmExchange.objects.get(session=last).request_messages
    answers = [json.loads(m["content"]).get("answer") for m in request if m["role"] == "tool"]
    assert answers == ["one", None, "two"]
    assert Session.objects.filter(task=task).count() == 3
    assert last.spec_options["resumed_from"] < last.pk


def test_the_paused_and_the_resumed_sessions_replay_identically(ops, scripted_provider):
    from tests.engine.replay_support import replay

    task = ask(ops, scripted_provider)
    task_answer(task_id=task.pk, answer="sdb", by="alice", via="api")
    assert run_task(task.pk) == "done"
    paused, resumed = Session.objects.filter(task=task).order_by("id")
    for session in (paused, resumed):
        report = replay(session.pk)
        assert report.identical, report.divergence and report.divergence.describe()
        assert report.stop_reason == session.stop_reason

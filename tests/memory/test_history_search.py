"""search_history and read_history_entry: a team searches and reads its own past (finished
sessions, chat topics it took part in), scrubbed and capped, never another team's."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory.history import ENTRY_CHARS, MAX_HISTORY_RESULTS
from openhive.core import scrubbing
from openhive.core.context import ToolContext
from openhive.engine.models import Session, ToolCall
from openhive.engine.tool_calls import call_tool
from openhive.org.services import team_spawn
from tasks.runner import run_task
from tasks.services import task_enqueue
from tests.api.factories import MessageFactory, SessionFactory, TopicFactory
from tests.factories import TaskFactory

SECRET = "sk-hist-0123456789abcdefSECRET"
# The word half on its own (test_history_hybrid.py covers the vector half and the fusion).
pytestmark = pytest.mark.usefixtures("no_embeddings")


def call(team, tool, session_id=None, **arguments):
    ctx = ToolContext(team=team, actor=team.name, session_id=session_id)
    return call_tool(ctx, tool, arguments)


def finished_session(team, *, asked: str, answer: str, **extra) -> Session:
    return SessionFactory(
        team=team,
        task=TaskFactory(team=team, text=asked, status="done"),
        final_text=answer,
        finished_at=timezone.now(),
        **extra,
    )


@pytest.fixture
def history(ops, research):
    """Each team's past: sessions and topics about a disk outage, a little else."""
    mine = finished_session(
        ops, asked="Investigate the disk outage on db1", answer="WAL files filled the disk."
    )
    other = finished_session(ops, asked="Renew certificates", answer="Renewed 3 certificates.")
    running = SessionFactory(team=ops, final_text="disk disk disk", finished_at=None)
    theirs = finished_session(research, asked="Benchmark the disk", answer="Disk reads 2 GB/s.")
    served = TopicFactory(name="Disk alerts")
    MessageFactory(topic=served, content="Why is the disk on db1 full?")
    MessageFactory(topic=served, role="assistant", content=f"Cleaning it; token {SECRET}.")
    SessionFactory(team=ops, task=None, topic=served, kind="chat", finished_at=timezone.now())
    asked_by_task = TopicFactory(name="Weekly chat")
    MessageFactory(topic=asked_by_task, content="Please check the disk quota too")
    TaskFactory(team=ops, topic=asked_by_task, text="check quota")
    foreign = TopicFactory(name="Research disk topic")
    MessageFactory(topic=foreign, content="research only: disk layouts")
    SessionFactory(team=research, task=None, topic=foreign, finished_at=timezone.now())
    return {
        "mine": mine,
        "other": other,
        "running": running,
        "theirs": theirs,
        "served": served,
        "asked_by_task": asked_by_task,
        "foreign": foreign,
    }


@pytest.fixture
def secret_known():
    scrubbing.remember([SECRET])
    yield
    scrubbing.invalidate()


@pytest.mark.django_db
def test_search_history_finds_only_the_teams_own_sessions_and_topics(ops, history, secret_known):
    found = call(ops, "search_history", query="disk outage db1", limit=10)
    assert found["success"] and found["search_mode"] == "full_text_only"
    keys = {(r["kind"], r["id"]) for r in found["results"]}
    assert keys == {
        ("session", history["mine"].pk),
        ("topic", history["served"].pk),
        ("topic", history["asked_by_task"].pk),
    }
    # The session that matches the most (and rarest) words ranks first.
    assert (found["results"][0]["kind"], found["results"][0]["id"]) == (
        "session",
        history["mine"].pk,
    )
    assert all(r["date"] and r["snippet"] for r in found["results"])
    assert "disk" in found["results"][0]["snippet"].lower()
    assert SECRET not in str(found) and "research" not in str(found).lower()


@pytest.mark.django_db
def test_read_history_entry_returns_the_entry_scrubbed(ops, history, secret_known):
    session = call(ops, "read_history_entry", kind="session", id=history["mine"].pk)
    assert session["success"] and session["kind"] == "session"
    assert "Investigate the disk outage" in session["text"]
    assert "WAL files filled the disk." in session["text"] and session["truncated"] is False
    assert session["task_id"] == history["mine"].task_id
    topic = call(ops, "read_history_entry", kind="topic", id=history["served"].pk)
    assert topic["name"] == "Disk alerts" and "Why is the disk on db1 full?" in topic["text"]
    assert SECRET not in str(topic) and "Cleaning it" in topic["text"]


@pytest.mark.django_db
def test_another_teams_entries_are_not_found(ops, history):
    for kind, key in (("session", "theirs"), ("topic", "foreign")):
        refused = call(ops, "read_history_entry", kind=kind, id=history[key].pk)
        assert refused["success"] is False and refused["code"] == "NOT_FOUND"
        assert "not in your team's history" in refused["error"]
    assert call(ops, "read_history_entry", kind="session", id=987654)["code"] == "NOT_FOUND"


@pytest.mark.django_db
def test_search_history_refuses_bad_input(ops, history):
    assert call(ops, "search_history", query="")["code"] == "INVALID_ARGUMENTS"
    assert call(ops, "search_history", query="?! --")["code"] == "INVALID_QUERY"
    too_many = call(ops, "search_history", query="disk", limit=MAX_HISTORY_RESULTS + 1)
    assert too_many["code"] == "INVALID_ARGUMENTS"
    assert call(ops, "read_history_entry", kind="memo", id=1)["code"] == "INVALID_ARGUMENTS"
    assert call(ops, "read_history_entry", kind="topic", id=0)["code"] == "INVALID_ARGUMENTS"
    # Operators of either full-text dialect are just words here.
    assert call(ops, "search_history", query='disk" OR "x')["success"] is True
    assert call(ops, "search_history", query="nothing matches zebra")["results"] == []


@pytest.mark.django_db
def test_a_long_entry_is_capped_and_says_so(ops):
    long = finished_session(ops, asked="Write the report", answer="word " * ENTRY_CHARS)
    entry = call(ops, "read_history_entry", kind="session", id=long.pk)
    assert entry["truncated"] is True and len(entry["text"]) == ENTRY_CHARS
    assert entry["text"].startswith("Asked: Write the report")


@pytest.mark.django_db
def test_the_calling_session_does_not_find_itself(ops):
    me = finished_session(ops, asked="find the zebra notes", answer="zebra")
    assert call(ops, "search_history", query="zebra")["results"][0]["id"] == me.pk
    assert call(ops, "search_history", session_id=me.pk, query="zebra")["results"] == []


@pytest.mark.django_db(transaction=True)
def test_a_scripted_task_session_searches_and_reads_its_history(main_team, scripted_provider):
    ops = team_spawn(parent=main_team, name="ops", description="Operations").team
    past = finished_session(ops, asked="Fix the broken backup job", answer="Backup job fixed.")
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "tool_calls": [{"name": "search_history", "arguments": {"query": "backup"}}]
                },
            },
            {
                "when": {"last": "tool", "tool": "search_history"},
                "reply": {
                    "tool_calls": [
                        {
                            "name": "read_history_entry",
                            "arguments": {"kind": "session", "id": past.pk},
                        }
                    ]
                },
            },
            {"when": {"last": "tool", "tool": "read_history_entry"}, "reply": {"content": "ok"}},
        ]
    )
    task = task_enqueue(team=ops, text="what happened to the backup?")
    assert run_task(task.pk) == "done"
    searched = ToolCall.objects.get(tool="search_history")
    assert searched.success and searched.team == ops
    assert [(r["kind"], r["id"]) for r in searched.result["results"]] == [("session", past.pk)]
    read = ToolCall.objects.get(tool="read_history_entry")
    assert read.success and "Backup job fixed." in read.result["text"]

"""Tracing: spans for the queue claim, each session, model call (GenAI conventions) and tool
call; a delegated and queried task tree is one trace, and its sessions know their parents."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openhive.core import logcontext
from openhive.engine import tracing
from openhive.engine.models import Session
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.config import default_config, write_team_config
from tests.factories import TeamFactory

_exporter = InMemorySpanExporter()
_installed: list[bool] = []


@pytest.fixture
def spans():
    if not _installed:
        tracing.add_span_processor(SimpleSpanProcessor(_exporter))
        _installed.append(True)
    _exporter.clear()
    yield _exporter
    _exporter.clear()


QUERY_DB = {"name": "query_team", "arguments": {"team": "db", "query": "?"}}
TREE = [
    {
        "when": {"team": "main", "last": "user"},
        "reply": {
            "tool_calls": [{"name": "delegate_task", "arguments": {"team": "ops", "task": "disks"}}]
        },
    },
    {"when": {"team": "main", "last": "tool"}, "reply": {"content": "delegated"}},
    {
        "when": {"team": "ops", "last": "user"},
        "reply": {
            "tool_calls": [{"name": "query_team", "arguments": {"team": "db", "query": "?"}}]
        },
    },
    {"when": {"team": "ops", "last": "tool"}, "reply": {"content": "db is fine"}},
    {"when": {"team": "db"}, "reply": {"content": "fine", "usage": {"prompt_tokens": 12}}},
]


@pytest.mark.django_db(transaction=True)
def test_a_delegated_and_queried_task_tree_is_one_trace(main_team, scripted_provider, spans):
    ops = TeamFactory(name="ops", parent=main_team, bootstrapped=True)
    TeamFactory(name="db", parent=ops, bootstrapped=True)
    write_team_config(default_config("ops", parent="main"))
    write_team_config(default_config("db", parent="ops"))
    scripted_provider(TREE)
    root = task_enqueue(team=main_team, text="have ops check the disks")
    assert run_task(root.pk) == "done"
    child_task = Task.objects.get(team=ops)
    assert child_task.options["parent_task_id"] == root.pk
    assert child_task.options["trace"]["traceparent"]
    assert run_task(child_task.pk) == "done"

    finished = spans.get_finished_spans()
    by_name: dict[str, list] = {}
    for span in finished:
        by_name.setdefault(span.name, []).append(span)
    assert {s.context.trace_id for s in finished} == {finished[0].context.trace_id}
    [main_session] = by_name["invoke_agent main"]
    [ops_session] = by_name["invoke_agent ops"]
    [db_session] = by_name["invoke_agent db"]
    [delegate] = by_name["execute_tool delegate_task"]
    [query] = by_name["execute_tool query_team"]
    assert delegate.parent.span_id == main_session.context.span_id
    claims = {c.attributes["openhive.task_id"]: c for c in by_name["openhive.queue claim"]}
    assert claims[child_task.pk].parent.span_id == delegate.context.span_id  # across the queue
    assert ops_session.parent.span_id == claims[child_task.pk].context.span_id
    assert main_session.parent.span_id == claims[root.pk].context.span_id
    assert query.parent.span_id == ops_session.context.span_id
    assert db_session.parent.span_id == query.context.span_id
    assert all(c.attributes["openhive.claimed"] for c in claims.values())

    chats = by_name["chat default.yaml"]
    assert len(chats) == 5
    db_chat = next(s for s in chats if s.parent.span_id == db_session.context.span_id)
    assert db_chat.attributes["gen_ai.operation.name"] == "chat"
    assert db_chat.attributes["gen_ai.provider.name"] == "scripted"
    assert db_chat.attributes["gen_ai.request.model"] == "default.yaml"
    assert db_chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert db_chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert query.attributes["gen_ai.tool.name"] == "query_team"

    sessions = {s.team.name: s for s in Session.objects.select_related("team")}
    assert sessions["ops"].parent_session_id == sessions["main"].pk
    assert sessions["ops"].parent_task_id == root.pk
    assert sessions["db"].parent_session_id == sessions["ops"].pk
    assert sessions["db"].parent_task_id == child_task.pk
    trace_id = format(main_session.context.trace_id, "032x")
    assert {s.trace_id for s in sessions.values()} == {trace_id}


@pytest.mark.django_db
def test_a_failed_model_call_is_an_error_span(main_team, scripted_provider, spans, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "LLM_RETRIES": 1, "LLM_BACKOFF_SECONDS": 0.001}
    scripted_provider([{"when": {}, "reply": {"error": {"status": 500, "message": "boom"}}}])
    from teams.agent import run_team_session

    run_team_session(main_team, "hi")
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 2
    assert all(s.status.status_code.name == "ERROR" for s in chats)
    assert chats[0].attributes["error.type"] == "server"


def test_no_exporter_without_otel_variables(monkeypatch):
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert tracing._configured_exporter() is None
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    assert type(tracing._configured_exporter()).__name__ == "ConsoleSpanExporter"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    assert type(tracing._configured_exporter()).__name__ == "OTLPSpanExporter"


@pytest.mark.django_db
def test_log_lines_of_a_session_carry_its_ids(main_team, scripted_provider, caplog):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    from teams.agent import run_team_session

    seen: list[dict] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(logcontext.current())

    handler = Grab(level=logging.INFO)
    logging.getLogger("openhive.engine.probe").addHandler(handler)
    from openhive.engine import session as session_module

    original = session_module.ResilientModel

    class Probe(original):
        def complete(self, *args, **kwargs):
            logging.getLogger("openhive.engine.probe").warning("calling")
            return super().complete(*args, **kwargs)

    session_module.ResilientModel = Probe
    try:
        outcome = run_team_session(main_team, "hi")
    finally:
        session_module.ResilientModel = original
        logging.getLogger("openhive.engine.probe").removeHandler(handler)
    assert seen and seen[0]["team"] == "main" and seen[0]["session_id"] == outcome.session_id


def test_the_json_log_format_carries_the_ids():
    import json

    formatter = logcontext.JsonFormatter()
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("you",), None)
    with logcontext.bind(team="ops", task_id=4, session_id=9):
        logcontext.ContextFilter().filter(record)
    line = json.loads(formatter.format(record))
    assert line["message"] == "hello you" and line["team"] == "ops"
    assert line["task_id"] == 4 and line["session_id"] == 9 and line["level"] == "INFO"
    assert record.ids == " [team=ops task_id=4 session_id=9]"


def test_step_spans_are_made_only_while_something_receives_them(monkeypatch, spans):
    opened = tracing.session_span(agent="ops", team_id=1, task_id=None, kind="task", carrier=None)
    with opened as session:
        monkeypatch.setitem(tracing._state, "listening", False)
        with tracing.tool_span("add", "call_1") as tool:
            assert tool is session  # nothing made: the session's span stays current
        monkeypatch.setitem(tracing._state, "listening", True)
        with tracing.tool_span("add", "call_2") as tool:
            assert tool is not session and tool.is_recording()
    assert [s.name for s in spans.get_finished_spans()][:1] == ["execute_tool add"]

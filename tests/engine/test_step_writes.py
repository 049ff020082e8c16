"""A session step's writes: one commit per step (its exchange, its tool calls' audit rows and
the session's totals together) or, for steps quicker than the write window, one per window; a
pinned number of queries per step, and no audit row lost on any way out of a session."""

from __future__ import annotations

import re

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from pydantic import BaseModel

from openhive.core import registry
from openhive.core.db import NO_FLUSH_WAIT
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.engine.recorder import RequestDigest, digest
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.agent import run_team_session
from tests.queries import as_written

pytestmark = pytest.mark.django_db

LIST = {"name": "list_teams"}
NOOP = {"name": "zz_step_noop"}


class _NoArgs(BaseModel):
    pass


@pytest.fixture
def noop_tool():
    """A tool that touches no table, so that only the session's own queries are counted."""
    before = set(registry._REGISTRY)

    @registry.tool(name="zz_step_noop", description="Do nothing", args=_NoArgs)
    def noop(ctx, args):
        called.append(1)
        return {}

    called: list[int] = []
    yield called
    for name in set(registry._REGISTRY) - before:
        del registry._REGISTRY[name]


def steps_then_answer(steps: int, calls_per_step: int = 1, call: dict = LIST) -> list[dict]:
    return [
        {"when": {}, "times": steps, "reply": {"tool_calls": [call] * calls_per_step}},
        {"when": {}, "reply": {"content": "done"}},
    ]


WRITE = re.compile(r'(?:^|; )(?:INSERT INTO|UPDATE|DELETE FROM) "')


def kinds(queries: list[dict]) -> dict[str, int]:
    """Round trips, commits, and the writes and reads among the statements (PostgreSQL gets
    a step's writes in one round trip, as one implicit transaction: no COMMIT of its own)."""
    queries = as_written(queries)
    counted = {"trips": len(queries), "commit": 0, "write": 0, "read": 0}
    for query in queries:
        sql = query["sql"].lstrip().removeprefix(NO_FLUSH_WAIT + "; ")
        verb = sql.split(None, 1)[0].upper()
        if verb == "COMMIT":
            counted["commit"] += 1
        elif verb == "SELECT":
            counted["read"] += 1
        counted["write"] += len(WRITE.findall(sql))
    return counted


def expected(reads: int) -> dict[str, int]:
    if connection.vendor == "postgresql":
        return {"trips": 1 + reads, "commit": 0, "write": 3, "read": reads}
    # SQLite: BEGIN, the three writes, COMMIT.
    return {"trips": 5 + reads, "commit": 1, "write": 3, "read": reads}


def per_step(run, scripted_provider) -> dict[str, float]:
    """Queries of one more step: a session of 4 tool-call steps less one of 1, over 3 (after
    a first session, which fills the caches a process keeps)."""
    counts = []
    for steps in (1, 1, 4):
        scripted_provider(steps_then_answer(steps, call=NOOP))
        with CaptureQueriesContext(connection) as captured:
            run()
        counts.append(kinds(captured.captured_queries))
    return {kind: (counts[2][kind] - counts[1][kind]) / 3 for kind in counts[0]}


@pytest.fixture
def write_window(settings):
    """Sets OPENHIVE_STEP_WRITE_WINDOW_MS."""

    def set_window(ms: float) -> None:
        settings.OPENHIVE = {**settings.OPENHIVE, "STEP_WRITE_WINDOW_MS": ms}

    return set_window


@pytest.mark.django_db(transaction=True)  # commits are counted
def test_a_chat_step_commits_once_and_reads_nothing(
    main_team, scripted_provider, noop_tool, write_window
):
    write_window(0)  # every step is further apart than the window

    def run() -> None:
        outcome = run_team_session(main_team, "go", kind=Session.Kind.CHAT, max_turns=10)
        assert outcome.ok

    # The exchange, the audit row and the session's totals: three statements, one commit.
    assert per_step(run, scripted_provider) == expected(reads=0)


@pytest.mark.django_db(transaction=True)
def test_a_task_step_reads_only_the_cancel_flag(
    main_team, scripted_provider, noop_tool, settings, write_window
):
    # No poll while a model call runs (a slow machine would add reads): the read before it.
    settings.OPENHIVE = {**settings.OPENHIVE, "CANCEL_POLL_SECONDS": 60, "CANCEL_FRESH_SECONDS": 0}
    write_window(0)

    def run() -> None:
        task = task_enqueue(team=main_team, text="go", options={"max_turns": 10})
        assert run_task(task.pk) == Task.Status.DONE

    assert per_step(run, scripted_provider) == expected(reads=1)


@pytest.mark.django_db(transaction=True)
def test_quick_steps_within_the_write_window_are_written_together_at_the_end(
    main_team, scripted_provider, noop_tool, write_window
):
    write_window(60_000)
    sessions = []

    def run() -> None:
        outcome = run_team_session(main_team, "go", kind=Session.Kind.CHAT, max_turns=10)
        assert outcome.ok
        sessions.append(outcome.session_id)

    # A step more adds nothing: its rows go with the session's end, in the same commit.
    assert per_step(run, scripted_provider) == {"trips": 0, "commit": 0, "write": 0, "read": 0}
    session = Session.objects.get(pk=sessions[-1])
    assert session.turns == 5 and session.finished_at is not None
    assert session.exchanges.count() == 5 and session.tool_calls.count() == 4


def test_a_step_slower_than_the_window_is_written_before_the_next_model_call(
    main_team, scripted_provider, noop_tool, write_window
):
    write_window(0)
    seen: list[tuple[int, int]] = []

    @registry.tool(name="zz_step_look", description="Count the rows", args=_NoArgs)
    def look(ctx, args):
        seen.append((ToolCall.objects.count(), LlmExchange.objects.count()))
        return {}

    scripted_provider(steps_then_answer(3, call={"name": "zz_step_look"}))
    assert run_team_session(main_team, "go", max_turns=10).ok
    # Each call sees the steps before it written (the audit row of its own step is not yet).
    assert seen == [(0, 0), (1, 1), (2, 2)]


def test_a_step_with_several_tool_calls_writes_their_audit_rows_together(
    main_team, scripted_provider
):
    scripted_provider(steps_then_answer(2, calls_per_step=3))
    outcome = run_team_session(main_team, "go", max_turns=10)
    assert outcome.ok
    session = Session.objects.get(pk=outcome.session_id)
    assert session.turns == 3 and session.tool_calls.count() == 6
    assert list(session.exchanges.values_list("turn", flat=True).order_by("turn")) == [1, 2, 3]
    calls = list(session.tool_calls.order_by("id"))
    # Each row keeps the time of its call, in the order the calls were made.
    assert [c.created_at for c in calls] == sorted(c.created_at for c in calls)


def test_a_cancel_between_two_tool_calls_keeps_the_first_ones_audit(
    main_team, scripted_provider, settings, noop_tool
):
    settings.OPENHIVE = {**settings.OPENHIVE, "CANCEL_POLL_SECONDS": 0}
    scripted_provider(steps_then_answer(5, calls_per_step=2, call=NOOP))

    def should_cancel() -> bool:
        return bool(noop_tool)  # cancelled once the first tool call has run

    outcome = run_team_session(main_team, "go", should_cancel=should_cancel, max_turns=10)
    assert outcome.stop_reason == "cancelled"
    session = Session.objects.get(pk=outcome.session_id)
    assert session.stop_reason == "cancelled" and session.turns == 1
    assert session.tool_calls.count() == 1 and session.exchanges.count() == 1


@pytest.mark.parametrize(
    "error", [SystemExit(1), KeyboardInterrupt(), OperationalError("database is gone")]
)
def test_an_error_escaping_the_session_keeps_the_completed_tool_calls_audit(
    main_team, scripted_provider, settings, noop_tool, error
):
    """The process is told to stop (or the database seems gone) between two tool calls of a
    step: the error goes on up, and the call that ran is in the audit, with its exchange."""
    settings.OPENHIVE = {**settings.OPENHIVE, "CANCEL_POLL_SECONDS": 0}
    scripted_provider(steps_then_answer(5, calls_per_step=2, call=NOOP))

    def should_cancel() -> bool:
        if noop_tool:  # after the first tool call, before the second
            raise error
        return False

    with pytest.raises(type(error)):
        run_team_session(main_team, "go", should_cancel=should_cancel, max_turns=10)
    session = Session.objects.get()
    assert session.finished_at is None  # nobody closed it: the reaper will
    assert ToolCall.objects.filter(session=session, tool="zz_step_noop").count() == 1
    assert session.exchanges.count() == 1 and session.turns == 1


@pytest.mark.django_db(transaction=True)
def test_an_audit_row_that_cannot_be_written_does_not_lose_the_step(
    main_team, scripted_provider, monkeypatch, caplog
):
    """The step's rows are written one by one when together they fail (here an audit row
    naming a team that no longer exists): the exchange and the other rows stay."""
    from openhive.engine.recorder import SessionRecorder

    original = SessionRecorder.audit

    def audit(self, row: dict) -> None:
        original(self, row)
        original(self, {**row, "team_id": 987654})  # a second row, pointing nowhere

    monkeypatch.setattr(SessionRecorder, "audit", audit)
    scripted_provider(steps_then_answer(1))
    outcome = run_team_session(main_team, "go", max_turns=5)
    assert outcome.ok
    session = Session.objects.get(pk=outcome.session_id)
    assert session.exchanges.count() == 2 and session.turns == 2
    assert list(session.tool_calls.values_list("team_id", flat=True)) == [main_team.pk]
    assert "could not record the audit row for tool list_teams" in caplog.text


def test_the_running_request_digest_is_the_digest_of_the_request():
    running = RequestDigest()
    messages: list[dict] = []
    assert running.of(messages) == digest(messages)
    for n in range(5):
        messages.append(
            {"role": "user", "content": f"m{n} é \u2028", "n": n, "a": [1, {"b": None}]}
        )
        assert running.of(messages) == digest(messages)
    rewritten = [{"role": "system", "content": "summary"}, *messages[3:]]
    assert running.of(rewritten) == digest(rewritten)
    assert running.of(messages[:2]) == digest(messages[:2])


def test_exchanges_and_totals_add_up_over_steps(main_team, scripted_provider):
    scripted_provider(
        [
            {
                "when": {},
                "times": 3,
                "reply": {"tool_calls": [LIST], "usage": {"prompt_tokens": 7}},
            },
            {"when": {}, "reply": {"content": "done", "usage": {"prompt_tokens": 5}}},
        ]
    )
    outcome = run_team_session(main_team, "go", max_turns=10)
    session = Session.objects.get(pk=outcome.session_id)
    rows = LlmExchange.objects.filter(session=session)
    assert session.prompt_tokens == sum(r.prompt_tokens for r in rows) == 26
    assert session.completion_tokens == sum(r.completion_tokens for r in rows)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sync", [False, True])
def test_session_writes_skip_the_wal_flush_wait_and_the_end_carrying_the_tasks_does_not(
    main_team, scripted_provider, settings, sync
):
    """PostgreSQL: the session's rows (its start and steps) commit without waiting for the
    WAL flush unless OPENHIVE_SESSION_SYNC_COMMIT asks; its end carries the task's end, which
    always waits, and with it every session row before it is on disk."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite commits in WAL mode with synchronous=NORMAL: no flush per commit")
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "SESSION_SYNC_COMMIT": sync,
        "STEP_WRITE_WINDOW_MS": 0,
    }
    scripted_provider(steps_then_answer(2))
    task = task_enqueue(team=main_team, text="go", options={"max_turns": 10})
    with CaptureQueriesContext(connection) as captured:
        assert run_task(task.pk) == Task.Status.DONE
    queries = [q["sql"] for q in as_written(captured.captured_queries)]
    # A write skips the wait when its transaction set it off first (same query or the one before).
    writes = [
        (NO_FLUSH_WAIT in sql or (i > 0 and queries[i - 1] == NO_FLUSH_WAIT), sql)
        for i, sql in enumerate(queries)
        if re.search(r'INSERT INTO "engine_session"|UPDATE "engine_session"', sql)
    ]
    assert len(writes) >= 3  # its start, its steps, and its end with the last steps' rows
    assert [skips for skips, _sql in writes[:-1]] == [not sync] * (len(writes) - 1)
    skips, last = writes[-1]
    assert 'UPDATE "tasks_task"' in last and not skips
    assert not any('UPDATE "tasks_task"' in sql for _skips, sql in writes[:-1])

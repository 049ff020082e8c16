"""A session's round trips to the database outside its steps: the scrubber's secrets read once
per session (and still no secret escapes), the session's row opened in one query on
PostgreSQL, and the steps' rows written by a statement whose text does not depend on how many
rows it writes (psycopg parses it once per process)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pydantic import BaseModel

from openhive.core import registry, scrubbing
from openhive.core.db import NO_FLUSH_WAIT
from openhive.core.rows import insert_statement
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.engine.services import session_open, session_record_step
from teams.agent import run_team_session
from tests.queries import as_written
from vault import crypto
from vault.models import VaultEntry
from vault.services import vault_read

pytestmark = pytest.mark.django_db

LATE_SECRET = "late-secret-Qw7x981-zz"


class _NoArgs(BaseModel):
    pass


@pytest.fixture
def temp_tools():
    before = set(registry._REGISTRY)
    yield registry.tool
    for name in set(registry._REGISTRY) - before:
        del registry._REGISTRY[name]


def _vault_reads(queries: list[dict]) -> int:
    return sum('"vault_vaultentry"' in q["sql"] for q in queries)


def test_a_session_reads_the_secrets_once(main_team, scripted_provider, monkeypatch):
    monkeypatch.setattr(scrubbing, "CACHE_SECONDS", 60.0)  # a slow machine reloads; not here
    scripted_provider(
        [
            {"when": {}, "times": 2, "reply": {"tool_calls": [{"name": "list_teams"}]}},
            {"when": {}, "reply": {"content": "done"}},
        ]
    )
    with CaptureQueriesContext(connection) as captured:
        assert run_team_session(main_team, "go", max_turns=10).ok
    # At its start, not again at its end (it used to reload there too).
    assert _vault_reads(as_written(captured.captured_queries)) == 1


def test_a_secret_stored_elsewhere_during_a_session_and_read_by_it_is_scrubbed(
    main_team, scripted_provider, temp_tools, vault_key, monkeypatch
):
    """Another process stores a secret after this session loaded the scrubber (here: a row
    written without telling this process's scrubber); the session reads it from the vault
    and repeats it. Its reply, its exchanges and its audit never hold the value."""
    monkeypatch.setattr(scrubbing, "CACHE_SECONDS", 60.0)

    @temp_tools(name="zz_late_secret", description="Read a secret", args=_NoArgs)
    def late(ctx, args):
        VaultEntry.objects.create(
            team=main_team, key="LATE", value=crypto.encrypt(LATE_SECRET), is_secret=True
        )
        return {"value": vault_read(team=main_team, key="LATE").value}

    scripted_provider(
        [
            {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "zz_late_secret"}]}},
            {"when": {}, "reply": {"content": f"The secret is {LATE_SECRET}."}},
        ]
    )
    outcome = run_team_session(main_team, "go", max_turns=5)
    assert outcome.ok
    session = Session.objects.get(pk=outcome.session_id)
    assert session.final_text == "The secret is [REDACTED]."
    rows = [
        *LlmExchange.objects.filter(session=session).values_list("request_messages", "response"),
        *ToolCall.objects.filter(session=session).values_list("arguments", "result"),
    ]
    assert rows and not any(LATE_SECRET in str(row) for row in rows)


def _open(team_id: int) -> Session:
    session, answers = session_open(
        team_id=team_id,
        kind=Session.Kind.TASK,
        trace_id="ab" * 16,
        spec_options={"subagent": "helper", "note": 'é"\\'},
    )
    assert answers == []
    return session


@pytest.mark.django_db(transaction=True)  # the write commits on its own
@pytest.mark.parametrize("sync", [False, True])
def test_a_session_opens_in_one_round_trip(main_team, settings, sync):
    settings.OPENHIVE = {**settings.OPENHIVE, "SESSION_SYNC_COMMIT": sync}
    with CaptureQueriesContext(connection) as captured:
        session = _open(main_team.pk)
    sqls = [q["sql"] for q in as_written(captured.captured_queries)]
    if connection.vendor == "postgresql":
        # BEGIN, the setting, the INSERT and COMMIT used to be four.
        assert len(sqls) == 1 and 'INSERT INTO "engine_session"' in sqls[0]
        assert sqls[0].startswith(NO_FLUSH_WAIT) is not sync
    else:  # the INSERT reads its key back; save() compiled it through the ORM at every start
        assert len(sqls) == 1 and "RETURNING" in sqls[0]
    stored = Session.objects.get(pk=session.pk)
    assert (stored.trace_id, stored.agent_name, stored.kind) == ("ab" * 16, "helper", "task")
    assert stored.spec_options == {"subagent": "helper", "note": 'é"\\'}
    assert stored.started_at == session.started_at and stored.finished_at is None
    assert not session._state.adding and session.team_id == main_team.pk


def test_an_opened_session_row_is_the_one_save_would_write(main_team):
    opened = Session.objects.get(pk=_open(main_team.pk).pk)
    saved = Session(
        team_id=main_team.pk,
        kind=Session.Kind.TASK,
        trace_id="ab" * 16,
        spec_options={"subagent": "helper", "note": 'é"\\'},
        agent_name="helper",
    )
    saved.save(force_insert=True)
    saved = Session.objects.get(pk=saved.pk)
    differ = {"id", "started_at"}
    fields = [f.attname for f in Session._meta.concrete_fields if f.attname not in differ]
    assert [getattr(opened, f) for f in fields] == [getattr(saved, f) for f in fields]
    assert abs(opened.started_at - saved.started_at) < dt.timedelta(seconds=5)


def _exchange(turn: int, **extra: object) -> dict:
    return {
        "turn": turn,
        "kind": "step",
        "request_digest": "d" * 64,
        "request_start": None,
        "request_messages": [{"role": "user", "content": "a'b\"c\\d é \u2028 {x} [1]"}],
        "tools": ["add"],
        "response": {"content": None, "nested": {"list": [1, 2.5, True, None]}},
        "prompt_tokens": 3,
        "cost_usd": Decimal("0.000123"),
        "created_at": dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC),
        **extra,
    }


def test_the_steps_rows_are_written_by_a_text_that_does_not_depend_on_their_number():
    one = insert_statement(LlmExchange, [_exchange(1)])[0]
    three = insert_statement(LlmExchange, [_exchange(n) for n in (1, 2, 3)])[0]
    if connection.vendor == "postgresql":
        # One JSON document of rows: a VALUES list was a new text (and a new parse) per row
        # count, and its values one quoted literal each.
        assert one == three and "jsonb_to_recordset(" in one
    else:
        assert one != three


def _calls(session: Session, team_id: int, count: int) -> list[dict]:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    return [
        {"session_id": session.pk, "team_id": team_id if n % 2 else None, "team_name": "main",
         "tool": f"tool{n}", "arguments": {"a": "é'\"", "n": [n, None]}, "success": bool(n % 2),
         "result": {"ok": [None, 1.25]}, "error": "bad 'quote' \\", "duration_ms": n,
         "created_at": at}
        for n in range(count)
    ]  # fmt: skip


def _fields(row: object, skip: set[str]) -> dict:
    return {
        f.attname: getattr(row, f.attname)
        for f in type(row)._meta.concrete_fields
        if f.attname not in skip
    }


# Every field given, as the recorder gives them: on PostgreSQL such rows go into the document
# as they are (but their moments and decimals); rows that leave fields out take their defaults
# field by field.
_EVERY_FIELD = {
    "tools_digest": "t" * 64,
    "provider_profile": "default",
    "finish_reason": "stop",
    "completion_tokens": 7,
    "latency_ms": 12,
    "cost_usd": Decimal("0.000125"),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("every_field", [False, True])
@pytest.mark.parametrize("count", [1, 3])
def test_the_steps_rows_hold_what_the_orm_writes(main_team, count, every_field):
    """A step's rows (a JSON document on PostgreSQL) read back as the same rows written
    through the ORM do: JSON columns, timestamps, decimals, NULLs, defaults."""
    ours, orms = _open(main_team.pk), _open(main_team.pk)
    given = _EVERY_FIELD if every_field else {}
    rows = [
        _exchange(n, request_start=n if n % 2 else None, attempts=[{"n": n, "f": 1.5}], **given)
        for n in range(1, count + 1)
    ]
    calls = _calls(ours, main_team.pk, count)
    session_record_step(session=ours, exchanges=rows, tool_calls=calls, fields={"turns": count})
    for row in rows:
        LlmExchange.objects.create(session=orms, **row)
    for call in _calls(orms, main_team.pk, count):
        ToolCall.objects.create(**call)
    skip = {"id", "session_id", "created_at"}  # the ORM stamps its own (auto_now_add)
    for model in (LlmExchange, ToolCall):
        got = [_fields(r, skip) for r in model.objects.filter(session=ours).order_by("id")]
        want = [_fields(r, skip) for r in model.objects.filter(session=orms).order_by("id")]
        assert len(got) == len(want) == count and got == want, model.__name__
    stored = LlmExchange.objects.filter(session=ours).order_by("turn").first()
    if every_field:
        assert stored.cost_usd == Decimal("0.000125") and stored.finish_reason == "stop"
    else:
        assert stored.cost_usd == Decimal("0.000123") and stored.finish_reason == ""
    assert stored.created_at == dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    assert Session.objects.get(pk=ours.pk).turns == count


@pytest.mark.django_db(transaction=True)
def test_a_value_too_long_for_its_column_is_refused_not_cut(main_team):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite does not enforce a varchar's length")
    session = _open(main_team.pk)
    with pytest.raises(Exception, match="too long"):
        session_record_step(
            session=session,
            exchanges=[_exchange(1, finish_reason="f" * 41)],
            tool_calls=[],
            fields={},
        )

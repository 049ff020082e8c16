"""Cancelling a session: when the cancel flag is read (before each step, between tool calls,
not again for quick steps unless a stop was asked for in this process), and what ran stays."""

from __future__ import annotations

import pytest

from openhive.engine.models import ToolCall
from teams.agent import run_team_session
from tests.engine.test_session import LIST_FOREVER, session_of

pytestmark = pytest.mark.django_db


def test_cancel_stops_the_session_before_the_next_step(
    main_team, scripted_provider, monkeypatch, settings
):
    # Slow steps (the session's clock moves a second at each look): the cancel check runs
    # before every step and every tool call. A process's first model call (litellm's lazy
    # imports) may outlast a poll interval and add a read: one is made first.
    import itertools
    import types

    scripted_provider([{"when": {}, "reply": {"content": "warm"}}])
    assert run_team_session(main_team, "warm up").ok

    from openhive.engine import session as session_module

    ticks = itertools.count()
    clock = types.SimpleNamespace(monotonic=lambda: float(next(ticks)))
    monkeypatch.setattr(session_module, "time", clock)
    scripted_provider(LIST_FOREVER)
    checks = []

    def should_cancel() -> bool:
        checks.append(1)
        return len(checks) > 3  # turn 1, its tool call, turn 2, then cancel

    outcome = run_team_session(main_team, "go", should_cancel=should_cancel, max_turns=10)
    assert outcome.stop_reason == "cancelled" and not outcome.ok
    session = session_of(outcome)
    assert session.stop_reason == "cancelled" and session.turns == 2
    assert ToolCall.objects.filter(session=session).count() == 1


@pytest.mark.parametrize("fresh, reads", [(0, 6), (60, 1)])
def test_a_quick_session_reads_the_cancel_flag_before_a_model_call_unless_just_read(
    main_team, scripted_provider, settings, fresh, reads
):
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "CANCEL_POLL_SECONDS": 60,
        "CANCEL_FRESH_SECONDS": fresh,
    }
    scripted_provider(
        [
            {"when": {}, "times": 5, "reply": {"tool_calls": [{"name": "list_teams"}]}},
            {"when": {}, "reply": {"content": "done"}},
        ]
    )
    checks = []
    outcome = run_team_session(
        main_team, "go", should_cancel=lambda: checks.append(1) or False, max_turns=10
    )
    assert outcome.ok and session_of(outcome).turns == 6
    # Six model calls, five tool calls, all within one poll interval: a read per model call,
    # or, when a read a moment ago still counts, only the first.
    assert len(checks) == reads


def test_cancel_before_the_first_turn_calls_no_model(main_team, scripted_provider):
    scripted_provider(LIST_FOREVER)
    outcome = run_team_session(main_team, "go", should_cancel=lambda: True)
    assert outcome.stop_reason == "cancelled"
    assert session_of(outcome).turns == 0


def test_a_stop_requested_in_this_process_is_read_before_the_next_model_call(
    main_team, scripted_provider, settings, monkeypatch
):
    """However recent the last read, a cancel made here (a tool cancelling, the reaper)
    is read before the next call: the session makes no call after it."""
    from openhive.engine import stopping

    settings.OPENHIVE = {**settings.OPENHIVE, "CANCEL_POLL_SECONDS": 60, "CANCEL_FRESH_SECONDS": 60}
    scripted_provider(LIST_FOREVER)
    cancelled: list[int] = []
    from openhive.engine import tool_calls

    original = tool_calls.call_tool

    def call_then_cancel(*args, **kwargs):
        result = original(*args, **kwargs)
        cancelled.append(1)
        stopping.stop_requested()
        return result

    monkeypatch.setattr("openhive.engine.session.call_tool", call_then_cancel)
    outcome = run_team_session(main_team, "go", should_cancel=lambda: bool(cancelled), max_turns=10)
    assert outcome.stop_reason == "cancelled"
    assert session_of(outcome).turns == 1

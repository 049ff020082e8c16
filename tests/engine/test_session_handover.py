"""A session that can be cancelled or time out runs on one pooled thread, watched from the
caller's (one that can be cancelled from its spec to its end, one that can only time out from
its first step): the model calls are made inline there (no hand-off per call), a cancel
abandons a call that does not return, and the abandoned loop writes nothing afterwards."""

from __future__ import annotations

import _thread
import signal
import threading
import time

import pytest
from django.db import transaction

from openhive.engine import handover
from openhive.engine import session as session_module
from openhive.engine.model import ResilientModel
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.engine.recorder import SessionRecorder
from teams.agent import run_team_session

pytestmark = pytest.mark.django_db

LIST_THREE_TIMES = [
    {"when": {}, "times": 3, "reply": {"tool_calls": [{"name": "list_teams"}]}},
    {"when": {}, "reply": {"content": "done"}},
]


@pytest.fixture
def quick_polls(settings):
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "CANCEL_POLL_SECONDS": 0.02,
        "CANCEL_FRESH_SECONDS": 0,
    }


@pytest.fixture
def threads(monkeypatch):
    """The thread of every model call and of every tool call the sessions make."""
    seen: dict[str, list[int]] = {"model": [], "tool": []}
    complete, call_tool = ResilientModel.complete, session_module.call_tool

    def on_model(self, *args, **kwargs):
        seen["model"].append(threading.get_ident())
        return complete(self, *args, **kwargs)

    def on_tool(*args, **kwargs):
        seen["tool"].append(threading.get_ident())
        return call_tool(*args, **kwargs)

    monkeypatch.setattr(ResilientModel, "complete", on_model)
    monkeypatch.setattr(session_module, "call_tool", on_tool)
    return seen


def test_a_cancellable_session_runs_its_steps_on_one_thread_without_a_hand_off_per_call(
    main_team, scripted_provider, threads
):
    scripted_provider(LIST_THREE_TIMES)
    outcome = run_team_session(main_team, "go", should_cancel=lambda: False, max_turns=10)
    assert outcome.ok and outcome.content == "done"
    assert len(threads["model"]) == 4 and len(threads["tool"]) == 3
    # Model calls and tool calls alike, on the loop's thread (not the caller's).
    assert set(threads["model"]) == set(threads["tool"]) != {threading.get_ident()}
    assert len(set(threads["model"])) == 1
    session = Session.objects.get(pk=outcome.session_id)
    assert session.turns == 4 and session.tool_calls.count() == 3


@pytest.fixture
def spec_and_end(monkeypatch):
    """The thread that builds each session's spec (the recorder learns its profile from it)
    and the thread that writes its end."""
    seen: dict[str, list[int]] = {"spec": [], "end": []}
    use_profile, finish = SessionRecorder.use_profile, SessionRecorder.finish

    def on_spec(self, profile):
        seen["spec"].append(threading.get_ident())
        return use_profile(self, profile)

    def on_end(self, *args, **kwargs):
        seen["end"].append(threading.get_ident())
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(SessionRecorder, "use_profile", on_spec)
    monkeypatch.setattr(SessionRecorder, "finish", on_end)
    return seen


def test_a_cancellable_session_is_handed_over_whole_from_its_spec_to_its_end(
    main_team, scripted_provider, threads, spec_and_end
):
    """The spec, prompt and history are built on the thread whose steps use them: handed over
    at its first step, a quick task session cost ~0.4 ms more (benchmarks/session_step.py)."""
    scripted_provider(LIST_THREE_TIMES)
    assert run_team_session(main_team, "go", should_cancel=lambda: False, max_turns=10).ok
    loop_thread = set(threads["model"])
    assert len(loop_thread) == 1 and loop_thread != {threading.get_ident()}
    assert set(spec_and_end["spec"]) == set(spec_and_end["end"]) == loop_thread


def test_a_session_that_can_only_time_out_is_handed_over_at_its_steps(
    main_team, scripted_provider, threads, spec_and_end
):
    """Its deadline comes with its spec, so the spec is built where the session began."""
    scripted_provider(LIST_THREE_TIMES)
    assert run_team_session(main_team, "go", timeout_seconds=30, max_turns=10).ok
    assert spec_and_end["spec"] == spec_and_end["end"] == [threading.get_ident()]
    assert len(set(threads["model"])) == 1 and set(threads["model"]) != {threading.get_ident()}


def test_a_session_that_cannot_be_stopped_runs_on_the_callers_thread(
    main_team, scripted_provider, threads
):
    scripted_provider(LIST_THREE_TIMES)
    assert run_team_session(main_team, "go", max_turns=10).ok
    assert set(threads["model"]) == set(threads["tool"]) == {threading.get_ident()}


def test_a_session_inside_the_callers_transaction_is_rolled_back_with_it(
    main_team, scripted_provider
):
    """The loop's thread writes through the caller's connection: its rows are in the
    caller's transaction, as when the loop ran on the caller's thread."""
    scripted_provider(LIST_THREE_TIMES)
    with pytest.raises(RuntimeError), transaction.atomic():
        outcome = run_team_session(main_team, "go", should_cancel=lambda: False, max_turns=10)
        assert Session.objects.get(pk=outcome.session_id).tool_calls.count() == 3
        raise RuntimeError("roll back")
    assert not Session.objects.exists() and not ToolCall.objects.exists()


def test_a_reply_that_comes_after_the_cancel_is_dropped_and_the_loop_writes_nothing(
    main_team, scripted_provider, quick_polls, monkeypatch
):
    scripted_provider(LIST_THREE_TIMES)
    waiting, release, returned = threading.Event(), threading.Event(), threading.Event()
    calls: list[int] = []
    original = ResilientModel.complete

    def complete(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the second call hangs until the test lets it answer
            waiting.set()
            release.wait(10)
            try:
                return original(self, *args, **kwargs)
            finally:
                returned.set()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ResilientModel, "complete", complete)
    started = time.monotonic()
    outcome = run_team_session(main_team, "go", should_cancel=waiting.is_set, max_turns=10)
    assert outcome.stop_reason == "cancelled" and time.monotonic() - started < 5
    session = Session.objects.get(pk=outcome.session_id)
    assert session.stop_reason == "cancelled" and session.finished_at is not None

    release.set()  # the hung call answers (a tool call) after the session ended
    assert returned.wait(5)
    time.sleep(0.2)  # time enough for a loop that went on to run its tool and call again
    assert len(calls) == 2
    assert ToolCall.objects.filter(session=session).count() == 1
    assert LlmExchange.objects.filter(session=session).count() == 1
    session.refresh_from_db()
    assert session.turns == 1 and session.stop_reason == "cancelled"


def test_a_timeout_abandons_a_model_call_that_does_not_return(
    main_team, scripted_provider, quick_polls
):
    scripted_provider([{"when": {}, "reply": {"content": "late", "delay_ms": 3000}}])
    started = time.monotonic()
    outcome = run_team_session(main_team, "go", timeout_seconds=0.3)
    assert outcome.stop_reason == "timeout"
    assert time.monotonic() - started < 2


def test_told_to_stop_in_the_middle_of_a_step_the_caller_waits_for_the_step_to_end():
    """A KeyboardInterrupt on the caller's thread while the loop runs a tool: the loop may be
    writing through the lent connection, so the caller lets it reach its next model call
    (where it stops, calling nothing) before the interrupt goes on up."""
    watch = handover.Watch()
    in_tool, steps = threading.Event(), []

    def loop() -> str:
        in_tool.set()
        time.sleep(0.3)  # a tool's work
        steps.append("tool done")
        with watch.model_call():
            steps.append("model called")
        return "never"

    def interrupt() -> None:
        in_tool.wait(5)
        _thread.interrupt_main()

    # A process started with SIGINT ignored (`pytest &` in a script) gets no KeyboardInterrupt
    # from `interrupt_main`: the test sets Python's own handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            handover.run_watched(loop, watch, poll=0.01, check=lambda: None)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started >= 0.3
    assert steps == ["tool done"]


def test_the_watch_reads_the_stop_conditions_only_while_the_loop_waits_for_a_reply():
    watch = handover.Watch()
    checks: list[int] = []
    watch.check_during_call(lambda: checks.append(1))
    assert checks == []  # between calls the loop reads them itself
    with watch.model_call():
        watch.check_during_call(lambda: checks.append(1))
    assert checks == [1]

    def cancelled() -> None:
        raise ValueError("cancelled")

    with pytest.raises(handover.Abandoned), watch.model_call(), pytest.raises(ValueError):
        watch.check_during_call(cancelled)
    with pytest.raises(handover.Abandoned), watch.model_call():
        pass  # an abandoned loop makes no further call

"""run_session: the tool loop and its stop reasons, with every exchange and tool call recorded."""

from __future__ import annotations

import json

import pytest
import yaml

from openhive.engine import llm
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.engine.spec import outcome_text
from teams.agent import run_team_session
from teams.config import default_config, write_team_config
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db

LIST_FOREVER = [{"when": {}, "reply": {"tool_calls": [{"name": "list_teams"}]}}]
LIST_THEN_ANSWER = [
    {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "list_teams"}]}},
    {"when": {"last": "tool"}, "reply": {"content": "There are no teams yet."}},
]


def session_of(outcome) -> Session:
    return Session.objects.get(pk=outcome.session_id)


@pytest.fixture
def ops(main_team):
    team = TeamFactory(name="ops", parent=main_team)
    write_team_config(default_config("ops", parent="main"))
    return team


def set_config(name: str, **changes) -> None:
    config = default_config(name, parent=None if name == "main" else "main")
    write_team_config(config.model_copy(update=changes))


def test_final_answer_completes_the_session(main_team, scripted_provider):
    scripted_provider(LIST_THEN_ANSWER)
    outcome = run_team_session(main_team, "which teams?")
    assert outcome.ok and outcome.stop_reason == "completed"
    assert outcome.content == "There are no teams yet." and outcome.error == ""
    session = session_of(outcome)
    assert session.stop_reason == "completed" and session.turns == 2
    assert session.final_text == "There are no teams yet."
    assert session.model == "scripted/default.yaml" and session.provider_profile == "default"
    assert session.finished_at is not None and session.kind == "task"
    assert outcome_text(outcome) == "There are no teams yet."


def test_max_turns_stops_a_session_that_never_answers(main_team, scripted_provider):
    scripted_provider(LIST_FOREVER)
    outcome = run_team_session(main_team, "loop", max_turns=3)
    assert outcome.stop_reason == "max_turns" and not outcome.ok
    session = session_of(outcome)
    assert session.stop_reason == "max_turns" and session.turns == 3
    assert LlmExchange.objects.filter(session=session).count() == 3
    assert ToolCall.objects.filter(session=session).count() == 3
    assert "3 turns" in outcome.error
    assert outcome_text(outcome).startswith("[Session stopped after 3 turns")


def test_max_turns_defaults_to_the_team_config(main_team, scripted_provider):
    set_config("main", max_turns=2)
    scripted_provider(LIST_FOREVER)
    outcome = run_team_session(main_team, "loop")
    assert outcome.stop_reason == "max_turns" and session_of(outcome).turns == 2


def test_missing_provider_is_an_error_that_tells_how_to_configure(main_team):
    outcome = run_team_session(main_team, "hello")
    assert outcome.stop_reason == "error"
    assert "providers.yaml" in outcome.error
    assert "scripted demo" in outcome.error and "openhive init --demo" in outcome.error
    session = session_of(outcome)
    assert session.stop_reason == "error" and session.error == outcome.error
    assert session.turns == 0 and not LlmExchange.objects.filter(session=session).exists()
    assert outcome_text(outcome).startswith("Error: ")


def test_profile_named_by_the_team_config_is_used(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "from default"}}])
    scripted_provider([{"when": {}, "reply": {"content": "from fast"}}], profile="fast")
    set_config("main", provider_profile="fast")
    outcome = run_team_session(main_team, "hi")
    assert outcome.content == "from fast"
    assert session_of(outcome).provider_profile == "fast"


def test_undefined_profile_is_an_error_naming_it(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    set_config("main", provider_profile="missing")
    outcome = run_team_session(main_team, "hi")
    assert outcome.stop_reason == "error" and '"missing" is not defined' in outcome.error


def test_team_without_config_is_an_error(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    team = TeamFactory(name="ghost", parent=main_team)
    outcome = run_team_session(team, "hi")
    assert outcome.stop_reason == "error" and "no config.yaml" in outcome.error


def test_timeout_stops_a_slow_session(main_team, scripted_provider):
    scripted_provider(
        [
            {"when": {"matches": "warm"}, "reply": {"content": "ready"}},
            {"when": {}, "reply": {"tool_calls": [{"name": "list_teams"}], "delay_ms": 50}},
        ]
    )
    # The process's first session loads the tokenizer (a fraction of a second): not this one.
    assert run_team_session(main_team, "warm up").ok
    # Timings with room for a loaded machine: some calls fit in the time (a stall of most of a
    # second still leaves one; 0.35 s once left none in CI), never fifty (at most twenty).
    outcome = run_team_session(main_team, "go", timeout_seconds=1.0, max_turns=50)
    assert outcome.stop_reason == "timeout"
    session = session_of(outcome)
    assert 1 <= session.turns < 50
    assert session.exchanges.count() == session.turns  # what ran before the stop is recorded


def test_every_exchange_is_recorded_with_its_turn_and_only_new_messages(
    main_team, scripted_provider
):
    scripted_provider(
        [
            {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "list_teams"}]}},
            {
                "when": {"last": "tool", "tool": "list_teams"},
                "reply": {"tool_calls": [{"name": "nope", "arguments": {"x": 1}}]},
            },
            {"when": {}, "reply": {"content": "done"}},
        ]
    )
    outcome = run_team_session(main_team, "hi")
    assert outcome.ok
    exchanges = list(LlmExchange.objects.filter(session_id=outcome.session_id).order_by("turn"))
    assert [e.turn for e in exchanges] == [1, 2, 3]
    first = exchanges[0]
    roles = [m["role"] for m in first.request_messages]
    assert roles == ["system", "system", "user"]
    assert first.request_messages[-1]["content"] == "hi"
    assert first.response["tool_calls"][0]["function"]["name"] == "list_teams"
    assert first.finish_reason == "tool_calls"
    second = exchanges[1]
    assert [m["role"] for m in second.request_messages] == ["assistant", "tool"]
    assert second.request_messages[1]["name"] == "list_teams"
    assert json.loads(second.request_messages[1]["content"]) == {"teams": [], "success": True}
    third = exchanges[2]
    assert [m["role"] for m in third.request_messages] == ["assistant", "tool"]
    assert json.loads(third.request_messages[1]["content"])["code"] == "UNKNOWN_TOOL"
    assert exchanges[-1].response["content"] == "done"
    assert exchanges[-1].finish_reason == "stop"
    assert len({e.request_digest for e in exchanges}) == len(exchanges)


def test_tool_events_are_emitted_in_order(main_team, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {"tool_calls": [{"name": "list_teams"}, {"name": "no_such_tool"}]},
            },
            {"when": {"last": "tool"}, "reply": {"content": "ok"}},
        ]
    )
    events: list[dict] = []
    outcome = run_team_session(main_team, "hi", on_event=events.append)
    assert outcome.ok
    assert events == [
        {"event": "tool_call", "name": "list_teams"},
        {"event": "tool_result", "name": "list_teams", "success": True},
        {"event": "tool_call", "name": "no_such_tool"},
        {
            "event": "tool_result",
            "name": "no_such_tool",
            "success": False,
            "error": events[-1]["error"],
            "code": "UNKNOWN_TOOL",
        },
    ]
    # A failure carries the tool's error, for the person watching the chat.
    assert events[-1]["error"].startswith('unknown tool "no_such_tool"')


def test_a_failing_event_listener_does_not_stop_the_session(main_team, scripted_provider):
    scripted_provider(LIST_THEN_ANSWER)

    def broken(event):
        raise ConnectionError("socket gone")

    outcome = run_team_session(main_team, "hi", on_event=broken)
    assert outcome.ok and outcome.content == "There are no teams yet."


def test_tool_failure_is_fed_back_to_the_model(main_team, scripted_provider):
    scripted_provider(
        [
            {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "nope"}]}},
            {"when": {"last": "tool", "matches": "UNKNOWN_TOOL"}, "reply": {"content": "sorry"}},
        ]
    )
    outcome = run_team_session(main_team, "hi")
    assert outcome.ok and outcome.content == "sorry"
    assert ToolCall.objects.get(session_id=outcome.session_id).success is False


def test_only_allowed_tools_are_offered_and_callable(ops, scripted_provider, monkeypatch):
    set_config("ops", allowed_tools=["list_te*"])
    scripted_provider(
        [
            {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "spawn_team"}]}},
            {"when": {"last": "tool"}, "reply": {"content": "done"}},
        ]
    )
    offered: list[list[str]] = []
    real = llm.complete

    def spy(profile, messages, tools, **kwargs):
        offered.append([t["function"]["name"] for t in tools])
        return real(profile, messages, tools, **kwargs)

    monkeypatch.setattr(llm, "complete", spy)
    outcome = run_team_session(ops, "hi")
    assert outcome.ok
    # Every tool matching the glob, and nothing else (other apps add list_* tools too).
    assert "list_teams" in offered[0] and offered[0] == offered[1]
    assert all(name.startswith("list_") for name in offered[0])
    call = ToolCall.objects.get(session_id=outcome.session_id)
    assert call.tool == "spawn_team" and not call.success
    assert call.result["code"] == "TOOL_NOT_ALLOWED"


def test_only_tools_narrows_the_offer(main_team, scripted_provider, monkeypatch):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    offered = []
    real = llm.complete

    def spy(profile, messages, tools, **kwargs):
        offered.append(sorted(t["function"]["name"] for t in tools))
        return real(profile, messages, tools, **kwargs)

    monkeypatch.setattr(llm, "complete", spy)
    run_team_session(main_team, "hi", only_tools=["list_teams"])
    assert offered == [["list_teams"]]


def test_history_comes_before_the_new_message(main_team, scripted_provider):
    scripted_provider(
        [
            {"when": {"matches": "^second$"}, "reply": {"content": "saw second"}},
            {"when": {}, "reply": {"content": "other"}},
        ]
    )
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}]
    outcome = run_team_session(main_team, "second", history=history)
    assert outcome.content == "saw second"
    sent = LlmExchange.objects.get(session_id=outcome.session_id).request_messages
    assert [m["content"] for m in sent[2:]] == ["first", "ok", "second"]


def test_a_provider_crash_is_an_error_not_an_exception(main_team, scripted_provider, monkeypatch):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])

    def crash(*args, **kwargs):
        raise ConnectionError("provider unreachable\nlong trace line\nmore")

    monkeypatch.setattr(llm, "complete", crash)
    outcome = run_team_session(main_team, "hi")
    assert outcome.stop_reason == "error"
    assert outcome.error == "ConnectionError: provider unreachable"


def test_session_links_its_task_and_kind(main_team, scripted_provider):
    from tasks.services import task_enqueue

    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    task = task_enqueue(team=main_team, text="do it")
    outcome = run_team_session(main_team, "do it", task_id=task.pk, kind="chat")
    session = session_of(outcome)
    assert session.task == task and session.kind == "chat"


def test_provider_file_can_point_to_a_script_by_absolute_path(main_team, openhive_dirs):
    script = openhive_dirs / "anywhere.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"when": {}, "reply": {"content": "abs"}}]}))
    (openhive_dirs / "data" / "config" / "providers.yaml").write_text(
        yaml.safe_dump({"profiles": {"default": {"model": f"scripted/{script}"}}})
    )
    assert run_team_session(main_team, "hi").content == "abs"


@pytest.mark.parametrize(
    "text", ["max_turns: 0\n", "max_turns: [\n", "- just\n- a list\n", "a plain string\n"]
)
def test_broken_team_config_is_a_clear_error(ops, scripted_provider, text):
    from openhive.core import paths

    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    (paths.team_dir("ops") / "config.yaml").write_text(text)
    outcome = run_team_session(ops, "hi")
    assert outcome.stop_reason == "error"
    assert outcome.error.startswith("config error in ") and "config.yaml" in outcome.error


def test_credentials_in_a_tool_call_are_scrubbed_from_every_exchange(
    main_team, scripted_provider, settings
):
    from cryptography.fernet import Fernet

    from vault import crypto

    settings.VAULT_KEYS = [Fernet.generate_key().decode()]
    crypto.reset_keys()
    secret = "handed-over-secret-987"
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "content": f"storing {secret}",
                    "tool_calls": [
                        {
                            "name": "spawn_team",
                            "arguments": {
                                "name": "ops",
                                "credentials": [{"key": "TOKEN", "value": secret}],
                            },
                        }
                    ],
                },
            },
            {"when": {"last": "tool"}, "reply": {"content": f"stored {secret}"}},
        ]
    )
    try:
        outcome = run_team_session(main_team, f"the token is {secret}")
    finally:
        crypto.reset_keys()
    assert outcome.ok and outcome.content == "stored [REDACTED]"
    exchanges = LlmExchange.objects.filter(session_id=outcome.session_id).order_by("turn")
    dumped = json.dumps([[e.request_messages, e.response] for e in exchanges])
    assert secret not in dumped
    assert "the token is [REDACTED]" in dumped and "storing [REDACTED]" in dumped
    assert secret not in session_of(outcome).final_text


def test_credentials_of_a_failed_spawn_are_still_scrubbed(main_team, scripted_provider):
    secret = "never-stored-secret-555"
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "tool_calls": [
                        {
                            "name": "spawn_team",
                            "arguments": {
                                "name": "Bad Name",
                                "credentials": [{"key": "TOKEN", "value": secret}],
                            },
                        }
                    ]
                },
            },
            {"when": {"last": "tool"}, "reply": {"content": f"could not store {secret}"}},
        ]
    )
    outcome = run_team_session(main_team, "go")
    assert outcome.content == "could not store [REDACTED]"
    rows = LlmExchange.objects.filter(session_id=outcome.session_id)
    assert secret not in json.dumps([[e.request_messages, e.response] for e in rows])
    assert secret not in json.dumps(list(ToolCall.objects.values("arguments", "result", "error")))


def test_tool_arguments_nested_too_deeply_fail_the_call_not_the_session(
    main_team, scripted_provider, monkeypatch
):
    """The loop parses a reply's arguments once (for the secrets they hand over and for the
    tool); arguments too deep to parse go to the tool as they came, which refuses them."""
    from decimal import Decimal

    from openhive.engine.model import ResilientModel

    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    call = {"id": "c1", "type": "function", "function": {"name": "list_teams", "arguments": deep}}
    replies = iter([{"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "assistant", "content": "gave up"}])  # fmt: skip
    seen: list[list[dict]] = []

    def complete(self, profile, messages, tools, **kwargs):
        seen.append(list(messages))
        return llm.Completion(next(replies), "stop", 1, 1, Decimal(0), 0, profile.name)

    scripted_provider([{"when": {}, "reply": {"content": "unused"}}])  # the profile only
    monkeypatch.setattr(ResilientModel, "complete", complete)
    outcome = run_team_session(main_team, "go")
    assert outcome.ok and outcome.content == "gave up"
    tool_message = seen[1][-1]
    assert tool_message["role"] == "tool" and "nested too deeply" in tool_message["content"]
    audit = ToolCall.objects.get(session_id=outcome.session_id)
    assert audit.success is False and audit.result["code"] == "INVALID_ARGUMENTS"

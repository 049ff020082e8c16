"""The scripted provider: YAML rules, first match wins, simulated latency and token usage."""

from __future__ import annotations

import json
import time

import pytest

from openhive.engine import scripted
from openhive.engine.models import LlmExchange, Session
from openhive.engine.scripted import (
    Conversation,
    Script,
    ScriptError,
    When,
    choose_reply,
    load_script,
    read_conversation,
    rule_matches,
    scripted_reply,
)
from teams.agent import run_team_session
from tests.factories import TeamFactory

SYSTEM = {"role": "system", "content": "rules"}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def tool_turn(name: str, result: dict | None = None) -> list[dict]:
    """An assistant call to `name` and the tool's result, as the session sends them."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1_0",
                    "type": "function",
                    "function": {"name": name, "arguments": "{}"},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1_0",
            "content": json.dumps(result or {"success": True}),
        },
    ]


def conv(**kwargs) -> Conversation:
    defaults = {"team": "main", "last_role": "user", "last_tool": None, "last_text": "hello"}
    return Conversation(**{**defaults, **kwargs})


# --- reading the conversation --------------------------------------------------------------


def test_conversation_facts_ignore_system_messages():
    facts = read_conversation([SYSTEM, user("Spawn ops")], "main")
    assert (facts.team, facts.last_role, facts.last_tool, facts.last_text) == (
        "main",
        "user",
        None,
        "Spawn ops",
    )
    assert all(m["role"] != "system" for m in facts.messages)


def test_tool_name_is_found_from_the_call_id_when_the_result_has_no_name():
    facts = read_conversation([SYSTEM, user("x"), *tool_turn("list_teams")], "ops")
    assert facts.last_role == "tool" and facts.last_tool == "list_teams"
    assert '"success": true' in facts.last_text


def test_list_content_parts_are_joined_as_text():
    message = {"role": "user", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}
    assert read_conversation([message], None).last_text == "ab"


# --- `when` keys ---------------------------------------------------------------------------


def test_team_key_matches_only_that_team():
    assert rule_matches(When(team="main"), conv(team="main"))
    assert not rule_matches(When(team="main"), conv(team="ops"))
    assert not rule_matches(When(team="main"), conv(team=None))


@pytest.mark.parametrize("role", ["user", "tool", "assistant"])
def test_last_key_matches_the_role_of_the_last_message(role):
    assert rule_matches(When(last=role), conv(last_role=role))
    others = {"user", "tool", "assistant"} - {role}
    assert not any(rule_matches(When(last=role), conv(last_role=o)) for o in others)


def test_last_key_accepts_only_known_roles():
    with pytest.raises(ValueError):
        When(last="system")


def test_tool_key_matches_the_tool_whose_result_is_last():
    assert rule_matches(When(tool="spawn_team"), conv(last_role="tool", last_tool="spawn_team"))
    assert not rule_matches(When(tool="spawn_team"), conv(last_role="tool", last_tool="x"))
    assert not rule_matches(When(tool="spawn_team"), conv(last_role="user"))


def test_matches_key_is_a_regex_search_on_the_last_text():
    assert rule_matches(When(matches="(?i)spawn .*ops"), conv(last_text="Please SPAWN the ops"))
    assert rule_matches(When(matches="ops$"), conv(last_text="the ops"))
    assert not rule_matches(When(matches="(?i)spawn .*ops"), conv(last_text="spawn research"))


def test_all_keys_must_hold_together():
    when = When(team="main", last="user", matches="ops")
    assert rule_matches(when, conv(team="main", last_role="user", last_text="ops"))
    assert not rule_matches(when, conv(team="ops", last_role="user", last_text="ops"))
    assert not rule_matches(when, conv(team="main", last_role="tool", last_text="ops"))
    assert not rule_matches(when, conv(team="main", last_role="user", last_text="dev"))


def test_empty_when_matches_anything():
    assert rule_matches(When(), conv())
    assert rule_matches(When(), conv(team=None, last_role=None, last_text=""))


def test_invalid_regex_is_refused_when_the_script_is_loaded():
    with pytest.raises(ValueError, match="matches"):
        When(matches="(unclosed")


# --- choosing a reply ------------------------------------------------------------------------


def write_script(openhive_dirs, rules, name="test.yaml"):
    import yaml

    scripts = openhive_dirs / "data" / "scripts"
    scripts.mkdir(parents=True, exist_ok=True)
    (scripts / name).write_text(yaml.safe_dump({"rules": rules}))
    return name


def test_first_matching_rule_wins(openhive_dirs):
    name = write_script(
        openhive_dirs,
        [
            {"when": {"matches": "hello"}, "reply": {"content": "first"}},
            {"when": {"last": "user"}, "reply": {"content": "second"}},
            {"when": {}, "reply": {"content": "fallback"}},
        ],
    )
    script = load_script(name)
    assert choose_reply(script, conv(last_text="hello")).content == "first"
    assert choose_reply(script, conv(last_text="bye")).content == "second"
    assert choose_reply(script, conv(last_role="tool", last_text="bye")).content == "fallback"


def test_a_new_script_starts_its_limited_rules_afresh_even_at_a_dropped_scripts_address():
    # CPython hands a freed object's address to the next one of its size: a use count kept by
    # `id(script)` made a fresh script inherit a dropped one's, and its `times: 1` rule was spent.
    for _ in range(20):
        script = Script.model_validate(
            {"rules": [{"when": {}, "times": 1, "reply": {"content": "once"}}]}
        )
        assert choose_reply(script, conv()).content == "once"
        with pytest.raises(ScriptError):
            choose_reply(script, conv())
        del script


def test_no_matching_rule_is_an_error_naming_the_script(openhive_dirs):
    name = write_script(openhive_dirs, [{"when": {"team": "ops"}, "reply": {"content": "x"}}])
    with pytest.raises(ScriptError, match=r"no rule matched") as err:
        scripted_reply(name, [SYSTEM, user("hi")], "main")
    assert "test.yaml" in str(err.value)
    assert "team=main" in str(err.value)


def test_reply_payload_is_an_openai_message_with_tool_calls(openhive_dirs):
    name = write_script(
        openhive_dirs,
        [
            {
                "when": {},
                "reply": {
                    "content": "calling",
                    "tool_calls": [
                        {"name": "list_teams", "arguments": {"recursive": True}},
                        {"name": "list_teams"},
                    ],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3},
                },
            }
        ],
    )
    payload = scripted_reply(name, [SYSTEM, user("hi")], "main")
    assert payload["finish_reason"] == "tool_calls"
    assert payload["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    calls = payload["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_0_0", "call_0_1"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"recursive": True}
    assert json.loads(calls[1]["function"]["arguments"]) == {}


def test_call_ids_stay_unique_across_turns(openhive_dirs):
    name = write_script(openhive_dirs, [{"when": {}, "reply": {"tool_calls": [{"name": "x"}]}}])
    first = scripted_reply(name, [user("hi")], "main")["message"]["tool_calls"][0]["id"]
    later = scripted_reply(name, [user("hi"), *tool_turn("x")], "main")
    assert later["message"]["tool_calls"][0]["id"] != first


def test_delay_ms_really_delays(openhive_dirs):
    name = write_script(openhive_dirs, [{"when": {}, "reply": {"content": "x", "delay_ms": 50}}])
    started = time.monotonic()
    scripted_reply(name, [user("hi")], "main")
    assert time.monotonic() - started >= 0.05


def test_negative_delay_is_refused(openhive_dirs):
    name = write_script(openhive_dirs, [{"when": {}, "reply": {"content": "x", "delay_ms": -1}}])
    with pytest.raises(ScriptError, match="is invalid"):
        load_script(name)


# --- loading scripts -----------------------------------------------------------------------


def test_script_is_found_without_its_yaml_suffix(openhive_dirs):
    write_script(openhive_dirs, [{"when": {}, "reply": {"content": "x"}}], name="demo.yaml")
    assert load_script("demo").rules[0].reply.content == "x"


def test_script_can_be_given_by_absolute_path(tmp_path):
    path = tmp_path / "elsewhere.yaml"
    path.write_text("rules:\n  - reply: {content: here}\n")
    assert load_script(str(path)).rules[0].reply.content == "here"


def test_missing_script_is_a_clear_error(openhive_dirs):
    with pytest.raises(ScriptError, match=r"script 'nope.yaml' not found"):
        load_script("nope.yaml")


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("rules: [\n", "is invalid"),
        ("rules:\n  - when: {colour: red}\n    reply: {content: x}\n", "colour"),
        ("rules:\n  - when: {}\n", "reply"),
        ("nothing: here\n", "rules"),
    ],
)
def test_invalid_script_is_a_clear_error(openhive_dirs, text, hint):
    scripts = openhive_dirs / "data" / "scripts"
    scripts.mkdir(parents=True, exist_ok=True)
    (scripts / "bad.yaml").write_text(text)
    with pytest.raises(ScriptError) as err:
        load_script("bad.yaml")
    message = str(err.value)
    assert "bad.yaml is invalid" in message and hint in message
    assert "\n" not in message  # one line, fit for a session error and a log line


def test_an_edited_script_is_read_again(openhive_dirs):
    import os

    name = write_script(openhive_dirs, [{"when": {}, "reply": {"content": "old"}}])
    assert load_script(name).rules[0].reply.content == "old"
    path = openhive_dirs / "data" / "scripts" / name
    path.write_text("rules:\n  - reply: {content: new}\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load_script(name).rules[0].reply.content == "new"


# --- through litellm and the session ----------------------------------------------------------


@pytest.mark.django_db
def test_team_key_sees_the_team_of_the_session(main_team, scripted_provider):
    TeamFactory(name="ops", parent=main_team)
    from teams.config import default_config, write_team_config

    write_team_config(default_config("ops", parent="main"))
    scripted_provider(
        [
            {"when": {"team": "ops"}, "reply": {"content": "ops speaking"}},
            {"when": {"team": "main"}, "reply": {"content": "main speaking"}},
        ]
    )
    from teams.models import Team

    ops = Team.objects.get(name="ops")
    assert run_team_session(ops, "hi").content == "ops speaking"
    assert run_team_session(main_team, "hi").content == "main speaking"


@pytest.mark.django_db
def test_tool_and_last_keys_drive_a_session(main_team, scripted_provider):
    scripted_provider(
        [
            {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "list_teams"}]}},
            {"when": {"last": "tool", "tool": "list_teams"}, "reply": {"content": "none yet"}},
        ]
    )
    outcome = run_team_session(main_team, "which teams?")
    assert outcome.ok and outcome.content == "none yet"


@pytest.mark.django_db
def test_no_rule_matched_ends_the_session_with_an_error_naming_the_script(
    main_team, scripted_provider
):
    scripted_provider([{"when": {"team": "nobody"}, "reply": {"content": "x"}}])
    outcome = run_team_session(main_team, "hi")
    assert outcome.stop_reason == Session.StopReason.ERROR
    assert "no rule matched" in outcome.error
    assert "default.yaml" in outcome.error
    session = Session.objects.get(pk=outcome.session_id)
    assert session.stop_reason == "error" and "default.yaml" in session.error


@pytest.mark.django_db
def test_usage_goes_into_the_session_and_exchange_token_counts(main_team, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "tool_calls": [{"name": "list_teams"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                },
            },
            {
                "when": {"last": "tool"},
                "reply": {
                    "content": "done",
                    "usage": {"prompt_tokens": 130, "completion_tokens": 5},
                },
            },
        ]
    )
    outcome = run_team_session(main_team, "hi")
    session = Session.objects.get(pk=outcome.session_id)
    assert (session.prompt_tokens, session.completion_tokens) == (230, 25)
    exchanges = list(LlmExchange.objects.filter(session=session).order_by("turn"))
    assert [(e.prompt_tokens, e.completion_tokens) for e in exchanges] == [(100, 20), (130, 5)]
    assert session.cost_usd == 0


@pytest.mark.django_db
def test_delay_ms_shows_in_the_recorded_latency(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "slow", "delay_ms": 50}}])
    started = time.monotonic()
    outcome = run_team_session(main_team, "hi")
    assert time.monotonic() - started >= 0.05
    assert LlmExchange.objects.get(session_id=outcome.session_id).latency_ms >= 50


@pytest.mark.django_db
def test_invalid_script_ends_the_session_with_a_clear_error(main_team, scripted_provider):
    path = scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    path.write_text("rules: [\n")
    scripted._cache.clear()
    outcome = run_team_session(main_team, "hi")
    assert outcome.stop_reason == "error"
    assert "default.yaml is invalid" in outcome.error
    assert "line 2" in outcome.error  # where the YAML breaks survives into the session error


@pytest.mark.django_db
def test_a_rule_error_names_the_rule_and_field_in_the_session_error(main_team, scripted_provider):
    path = scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    path.write_text("rules:\n  - when: {}\n    reply: {content: x, delay: 5}\n")
    scripted._cache.clear()
    outcome = run_team_session(main_team, "hi")
    assert "rules.0.reply.delay: Extra inputs are not permitted" in outcome.error


@pytest.mark.django_db
def test_a_scripted_call_is_priced_by_its_script_without_litellm_failing_to(
    main_team, scripted_provider, monkeypatch, caplog
):
    import traceback

    from openhive.engine import llm

    llm._priced.clear()  # priced anew in this test: its registration is what is checked

    scripted_provider(
        [{"when": {}, "reply": {"content": "ok", "usage": {"prompt_tokens": 5, "cost_usd": 0.25}}}]
    )
    formatted: list[str] = []  # litellm formats a traceback whenever its own pricing fails
    real = traceback.format_exc
    monkeypatch.setattr(traceback, "format_exc", lambda *a, **k: formatted.append(1) or real())
    outcome = run_team_session(main_team, "hi")
    assert outcome.ok
    assert Session.objects.get(pk=outcome.session_id).cost_usd == pytest.approx(0.25)
    assert formatted == []
    assert [r.getMessage() for r in caplog.records if r.name == "LiteLLM"] == []  # no warning


def test_forget_uses_lets_a_loaded_scripts_limited_rules_answer_again(openhive_dirs):
    name = write_script(
        openhive_dirs,
        [
            {"when": {}, "times": 1, "reply": {"content": "once"}},
            {"when": {}, "reply": {"content": "after"}},
        ],
    )
    script = load_script(name)
    assert [choose_reply(script, conv()).content for _ in range(2)] == ["once", "after"]
    scripted.forget_uses()
    assert choose_reply(load_script(name), conv()).content == "once"

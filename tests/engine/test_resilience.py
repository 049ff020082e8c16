"""Model-call resilience: retries with backoff (Retry-After honoured), fallbacks, every attempt
recorded on the exchange, and a session that says the provider is down."""

from __future__ import annotations

import random

import pytest
import yaml

from openhive.engine import llm
from openhive.engine.model import ResilientModel, backoff_seconds
from openhive.engine.models import LlmExchange, Session
from openhive.engine.providers import resolve_profile
from teams.agent import run_team_session

pytestmark = pytest.mark.django_db

ANSWER = {"when": {}, "reply": {"content": "fine", "usage": {"prompt_tokens": 7}}}


def rate_limited(times: int = 1, retry_after: float | None = None) -> dict:
    error = {"status": 429, "message": "slow down"}
    if retry_after is not None:
        error["retry_after"] = retry_after
    return {"when": {}, "times": times, "reply": {"error": error}}


def server_error(status: int = 500) -> dict:
    return {"when": {}, "reply": {"error": {"status": status, "message": "boom"}}}


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "LLM_RETRIES": 3,
        "LLM_BACKOFF_SECONDS": 0.001,
        "LLM_BACKOFF_MAX_SECONDS": 0.005,
    }


def add_fallback(openhive_dirs, profile: str, *fallbacks: str) -> None:
    path = openhive_dirs / "data" / "config" / "providers.yaml"
    data = yaml.safe_load(path.read_text())
    data["profiles"][profile]["fallbacks"] = list(fallbacks)
    path.write_text(yaml.safe_dump(data))


def exchanges(outcome) -> list[LlmExchange]:
    return list(LlmExchange.objects.filter(session_id=outcome.session_id).order_by("turn"))


def test_a_rate_limit_is_retried_and_the_attempts_are_recorded(main_team, scripted_provider):
    scripted_provider([rate_limited(times=2), ANSWER])
    outcome = run_team_session(main_team, "hello")
    assert outcome.ok and outcome.content == "fine"
    [exchange] = exchanges(outcome)
    assert [a["ok"] for a in exchange.attempts] == [False, False, True]
    assert exchange.attempts[0]["status"] == 429 and exchange.attempts[0]["kind"] == "rate_limit"
    assert "slow down" in exchange.attempts[0]["error"]
    assert exchange.attempts[0]["waited_ms"] >= 0
    assert exchange.provider_profile == "default" and exchange.kind == "step"


def test_retry_after_is_honoured(main_team, scripted_provider):
    scripted_provider([rate_limited(times=1, retry_after=0.2), ANSWER])
    outcome = run_team_session(main_team, "hello")
    assert outcome.ok
    first = exchanges(outcome)[0].attempts[0]
    assert first["retry_after"] == 0.2 and first["waited_ms"] >= 200


def test_backoff_grows_with_jitter_and_never_undercuts_retry_after(settings):
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "LLM_BACKOFF_SECONDS": 1.0,
        "LLM_BACKOFF_MAX_SECONDS": 8.0,
    }
    rng = random.Random(7)
    delays = [backoff_seconds(n, None, rng=rng) for n in (1, 2, 3, 4, 5)]
    assert 0.5 <= delays[0] <= 1 and 1 <= delays[1] <= 2 and 2 <= delays[2] <= 4
    assert all(4 <= d <= 8 for d in delays[3:])  # capped
    assert len({round(d, 6) for d in delays}) == len(delays)  # jittered
    assert backoff_seconds(1, 30.0, rng=rng) == 30.0


def test_a_profile_that_stays_down_falls_back_to_the_next(
    main_team, scripted_provider, openhive_dirs
):
    scripted_provider([server_error(500)])
    scripted_provider([{"when": {}, "reply": {"content": "from backup"}}], profile="backup")
    add_fallback(openhive_dirs, "default", "backup")
    outcome = run_team_session(main_team, "hello")
    assert outcome.ok and outcome.content == "from backup"
    [exchange] = exchanges(outcome)
    assert exchange.provider_profile == "backup"
    profiles = [(a["profile"], a["ok"]) for a in exchange.attempts]
    assert profiles == [("default", False)] * 4 + [("backup", True)]


def test_a_request_error_is_not_retried_but_falls_back(main_team, scripted_provider, openhive_dirs):
    scripted_provider([server_error(400)])
    scripted_provider([{"when": {}, "reply": {"content": "from backup"}}], profile="backup")
    add_fallback(openhive_dirs, "default", "backup")
    outcome = run_team_session(main_team, "hello")
    assert outcome.ok
    attempts = exchanges(outcome)[0].attempts
    assert [(a["profile"], a.get("status")) for a in attempts] == [
        ("default", 400),
        ("backup", None),
    ]


def test_every_profile_down_ends_the_session_as_transient_with_the_attempts_recorded(
    main_team, scripted_provider, openhive_dirs
):
    scripted_provider([server_error(503)])
    scripted_provider([rate_limited(times=99, retry_after=0.01)], profile="backup")
    add_fallback(openhive_dirs, "default", "backup")
    outcome = run_team_session(main_team, "hello")
    assert outcome.stop_reason == "error" and outcome.transient
    assert outcome.retry_after == 0.01
    assert "did not answer after 8 attempt(s)" in outcome.error
    assert "default, backup" in outcome.error
    [failed] = exchanges(outcome)
    assert failed.kind == "failed" and len(failed.attempts) == 8
    session = Session.objects.get(pk=outcome.session_id)
    assert session.turns == 0 and session.stop_reason == "error"


def test_fallbacks_must_name_defined_profiles(scripted_provider, openhive_dirs):
    scripted_provider([ANSWER])
    add_fallback(openhive_dirs, "default", "nowhere")
    with pytest.raises(Exception, match='names fallback "nowhere"'):
        resolve_profile("default")


def test_a_script_error_is_not_a_provider_error(main_team, scripted_provider):
    scripted_provider([{"when": {"last": "tool"}, "reply": {"content": "x"}}])
    outcome = run_team_session(main_team, "hello")
    assert outcome.stop_reason == "error" and not outcome.transient
    assert "no rule matched" in outcome.error


def test_resilient_model_sleeps_between_attempts(scripted_provider):
    scripted_provider([rate_limited(times=1, retry_after=0.5), ANSWER])
    slept: list[float] = []
    model = ResilientModel(sleep=slept.append)
    reply = model.complete(
        resolve_profile("default"), [{"role": "user", "content": "x"}], [], agent="main"
    )
    assert slept == [0.5] and reply.message["content"] == "fine"
    assert isinstance(reply, llm.Completion) and len(reply.attempts) == 2

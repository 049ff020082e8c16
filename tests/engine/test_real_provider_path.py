"""The real provider path: sessions driven through litellm's own `openai/` and `anthropic/`
providers against a provider on loopback (tests/engine/fake_llm.py): tool calls, usage and
cost, streaming, retries on 429 (Retry-After) and on a hang, fallbacks, and budgets."""

from __future__ import annotations

import pytest
import yaml

from openhive.engine.llm import get_litellm
from openhive.engine.models import LlmExchange, Session
from teams.agent import run_team_session
from teams.config import default_config, write_team_config
from tests.engine.fake_llm import FakeLLM, Turn
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db

MODELS = {
    "openai": ("openai/gpt-4o-mini", "/v1", "sk-fake-openai-key-000000"),
    "anthropic": ("anthropic/claude-haiku-4-5", "", "sk-ant-fake-key-0000000"),
}


@pytest.fixture
def fake():
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "LLM_RETRIES": 2,
        "LLM_BACKOFF_SECONDS": 0.01,
        "LLM_BACKOFF_MAX_SECONDS": 0.02,
    }


def configure(openhive_dirs, fake: FakeLLM, default: str, **extra) -> None:
    profiles = {}
    for name, (model, suffix, key) in MODELS.items():
        profiles[name] = {"model": model, "api_base": fake.base + suffix, "api_key": key}
    profiles["default"] = {**profiles[default], **extra}
    path = openhive_dirs / "data" / "config" / "providers.yaml"
    path.write_text(yaml.safe_dump({"profiles": profiles}))


@pytest.fixture
def ops(main_team):
    team = TeamFactory(name="ops", parent=main_team, bootstrapped=True)
    write_team_config(default_config("ops", parent="main"))
    return team


def exchanges(outcome) -> list[LlmExchange]:
    return list(LlmExchange.objects.filter(session_id=outcome.session_id).order_by("turn"))


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_tool_call_then_an_answer(protocol, fake, ops, openhive_dirs):
    configure(openhive_dirs, fake, protocol)
    fake.script(
        Turn(tool="list_teams", prompt_tokens=120, completion_tokens=9),
        Turn(text="There are no teams.", prompt_tokens=150, completion_tokens=6),
    )
    outcome = run_team_session(ops, "which teams?")
    assert outcome.ok and outcome.content == "There are no teams."
    first, _second = exchanges(outcome)
    assert first.response["tool_calls"][0]["function"]["name"] == "list_teams"
    assert first.prompt_tokens == 120 and first.completion_tokens == 9
    session = Session.objects.get(pk=outcome.session_id)
    assert session.prompt_tokens == 270 and session.cost_usd > 0  # litellm's price list
    # Each step's cost is litellm's price for that step's usage, priced once.
    price = get_litellm().cost_per_token
    expected = sum(
        sum(price(model=session.model, prompt_tokens=p, completion_tokens=c))
        for p, c in ((120, 9), (150, 6))
    )
    assert float(session.cost_usd) == pytest.approx(expected, abs=1e-6)  # stored to 6 places
    # The tool result went back in the provider's own format.
    last = fake.requests[-1]
    assert last["protocol"] == protocol
    text = str(last["messages"])
    assert "list_teams" in text and '"teams": []' in text.replace("\\", "")
    assert len(fake.requests[0]["tools"]) == len(first.tools) > 0


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_reply_streams_as_deltas(protocol, fake, ops, openhive_dirs):
    configure(openhive_dirs, fake, protocol)
    fake.script(
        Turn(tool="list_teams"),
        Turn(text="The answer, streamed in several small pieces.", completion_tokens=12),
    )
    events: list[dict] = []
    outcome = run_team_session(ops, "go", stream=True, on_event=events.append)
    assert outcome.ok and outcome.content == "The answer, streamed in several small pieces."
    deltas = [e["content"] for e in events if e["event"] == "delta"]
    assert len(deltas) > 3 and "".join(deltas) == outcome.content
    assert [e["event"] for e in events if e["event"] != "delta"] == ["tool_call", "tool_result"]
    assert all(r["stream"] for r in fake.requests)
    assert exchanges(outcome)[-1].completion_tokens == 12
    assert exchanges(outcome)[0].response["tool_calls"][0]["function"]["name"] == "list_teams"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_429_is_retried_after_its_retry_after(protocol, fake, ops, openhive_dirs):
    configure(openhive_dirs, fake, protocol)
    fake.script(Turn(status=429, retry_after=0.3), Turn(text="ok"))
    outcome = run_team_session(ops, "go")
    assert outcome.ok and outcome.content == "ok"
    [exchange] = exchanges(outcome)
    failed, succeeded = exchange.attempts
    assert failed["status"] == 429 and failed["kind"] == "rate_limit"
    assert failed["retry_after"] == pytest.approx(0.3) and failed["waited_ms"] >= 300
    assert succeeded["ok"]


def test_a_500_falls_back_to_the_other_provider(fake, ops, openhive_dirs):
    configure(openhive_dirs, fake, "openai", fallbacks=["anthropic"])
    fake.script(Turn(status=500), Turn(status=500), Turn(status=500), Turn(text="from claude"))
    outcome = run_team_session(ops, "go")
    assert outcome.ok and outcome.content == "from claude"
    [exchange] = exchanges(outcome)
    assert exchange.provider_profile == "anthropic"
    assert [(a["profile"], a.get("status")) for a in exchange.attempts] == [
        ("default", 500),
        ("default", 500),
        ("default", 500),
        ("anthropic", None),
    ]
    assert [r["protocol"] for r in fake.requests] == ["openai"] * 3 + ["anthropic"]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_hang_times_out_and_is_retried(protocol, fake, ops, openhive_dirs):
    configure(openhive_dirs, fake, protocol, timeout=1.0)
    fake.script(Turn(hang=30), Turn(text="awake"))
    outcome = run_team_session(ops, "go")
    assert outcome.ok and outcome.content == "awake"
    failed = exchanges(outcome)[0].attempts[0]
    assert failed["kind"] == "timeout" and failed["retryable"]


def test_a_provider_that_stays_down_ends_the_session_as_transient(fake, ops, openhive_dirs):
    configure(openhive_dirs, fake, "anthropic")
    fake.script(default=Turn(status=529, retry_after=0.05))
    outcome = run_team_session(ops, "go")
    assert outcome.stop_reason == "error" and outcome.transient
    assert outcome.retry_after == pytest.approx(0.05)
    [failed] = exchanges(outcome)
    assert failed.kind == "failed" and len(failed.attempts) == 3


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_budgets_hold_on_the_real_path(protocol, fake, ops, openhive_dirs):
    configure(openhive_dirs, fake, protocol)
    config = default_config("ops", parent="main")
    write_team_config(
        config.model_copy(
            update={"budgets": config.budgets.model_copy(update={"task_tokens": 28_000})}
        )
    )
    fake.script(default=Turn(tool="list_teams", prompt_tokens=10_000, completion_tokens=100))
    outcome = run_team_session(ops, "go", max_turns=20)
    assert outcome.stop_reason == "budget_exceeded" and len(fake.requests) == 3
    assert "30,300 tokens spent of 28,000 tokens" in outcome.content

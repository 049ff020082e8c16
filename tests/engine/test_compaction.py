"""Context compaction: past the threshold of the profile's context_window, big tool results of
older turns are cut with a note, then older turns are summarised by a recorded model call; the
system prompt and the latest turns stay verbatim. Deterministic, so a replay is identical."""

from __future__ import annotations

import json

import pytest
import yaml
from django.utils import timezone

from openhive.core.context import ToolContext
from openhive.engine import compaction
from openhive.engine.models import LlmExchange, Session
from openhive.engine.providers import resolve_profile
from openhive.engine.replay import recorded_calls
from openhive.engine.tokens import TokenCounter
from openhive.engine.tool_calls import call_tool
from tasks.models import Task
from teams.agent import agent_spec_for, run_team_session
from teams.config import default_config, write_team_config
from tests.engine.replay_support import replay
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db

SUMMARY = {
    "when": {"matches": "^Summarise the conversation"},
    "reply": {"content": "Summary: the agent listed the teams several times."},
}


@pytest.fixture
def ops(main_team, settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "COMPACT_KEEP_MESSAGES": 2}
    team = TeamFactory(name="ops", parent=main_team, bootstrapped=True)
    write_team_config(default_config("ops", parent="main"))
    return team


def set_window(openhive_dirs, ops, headroom: int) -> int:
    """A context window whose threshold leaves `headroom` tokens above the first request."""
    spec = agent_spec_for(ops, inbox=[])
    schemas = [t.function_schema() for t in spec.tools]
    first = [*spec.system_messages, {"role": "user", "content": "work"}]
    base = TokenCounter(spec.profile, schemas).count(first, tools=schemas)
    window = int((base + headroom) / 0.8) + 1
    path = openhive_dirs / "data" / "config" / "providers.yaml"
    data = yaml.safe_load(path.read_text())
    data["profiles"]["default"]["context_window"] = window
    path.write_text(yaml.safe_dump(data))
    assert resolve_profile().context_window == window
    return window


def requests(outcome) -> list:
    session = Session.objects.get(pk=outcome.session_id)
    return recorded_calls(session)


def test_older_turns_are_summarised_by_a_recorded_call(ops, scripted_provider, openhive_dirs):
    scripted_provider(
        [
            SUMMARY,
            {"when": {}, "times": 12, "reply": {"tool_calls": [{"name": "list_teams"}]}},
            {"when": {}, "reply": {"content": "done"}},
        ]
    )
    set_window(openhive_dirs, ops, headroom=150)
    outcome = run_team_session(ops, "work", max_turns=30)
    assert outcome.ok and outcome.content == "done"
    calls = requests(outcome)
    kinds = [c.kind for c in calls]
    assert "compaction" in kinds
    first = kinds.index("compaction")
    summary_call = calls[first]
    assert summary_call.request[-1]["content"].startswith("Summarise the conversation")
    assert "assistant called list_teams" in summary_call.request[-1]["content"]
    after = calls[first + 1].request
    system = [m for m in after if m["role"] == "system"]
    assert system == [m for m in calls[0].request if m["role"] == "system"]  # verbatim
    body = [m for m in after if m["role"] != "system"]
    assert body[0]["content"].startswith(compaction.SUMMARY_MARKER)
    assert "Summary: the agent listed the teams" in body[0]["content"]
    # The latest turns stay verbatim: the previous step's reply and its tool result.
    assert len(body) == 3
    assert body[1]["tool_calls"] == calls[first - 1].exchange.response["tool_calls"]
    assert body[2]["role"] == "tool" and body[2]["name"] == "list_teams"
    exchange = LlmExchange.objects.get(
        session_id=outcome.session_id, kind="compaction", turn=first + 1
    )
    assert exchange.response["content"].startswith("Summary:")
    session = Session.objects.get(pk=outcome.session_id)
    assert session.turns == 13  # steps only; the summary call is not a turn


def test_big_tool_results_of_older_turns_are_cut_first(ops, scripted_provider, openhive_dirs):
    words = " ".join(f"word{i}" for i in range(80))
    for n in range(40):
        Task.objects.create(
            team=ops, text=f"t{n}", status="done", result=words, finished_at=timezone.now()
        )
    scripted_provider(
        [
            SUMMARY,
            {"when": {}, "times": 3, "reply": {"tool_calls": [{"name": "list_completed_tasks"}]}},
            {"when": {}, "reply": {"content": "done"}},
        ]
    )
    big = json.dumps(call_tool(ToolContext(team=ops), "list_completed_tasks", {}))
    spec = agent_spec_for(ops, inbox=[])
    size = TokenCounter(spec.profile, []).count([{"role": "tool", "content": big}])
    assert size > 2000
    set_window(openhive_dirs, ops, headroom=int(size * 1.5))  # one big result fits, two do not
    outcome = run_team_session(ops, "work", max_turns=10)
    assert outcome.ok
    calls = requests(outcome)
    assert [c.kind for c in calls] == ["step"] * 4  # cutting was enough: no summary call
    last = calls[-1].request
    results = [m for m in last if m["role"] == "tool"]
    assert "[cut:" in results[0]["content"] and "[cut:" in results[1]["content"]
    assert len(results[0]["content"]) < 2300
    assert "[cut:" not in results[-1]["content"]  # the latest turn stays verbatim


def test_a_compacted_session_replays_identically(ops, scripted_provider, openhive_dirs):
    scripted_provider(
        [
            SUMMARY,
            {"when": {}, "times": 12, "reply": {"tool_calls": [{"name": "list_teams"}]}},
            {"when": {}, "reply": {"content": "done"}},
        ]
    )
    set_window(openhive_dirs, ops, headroom=150)
    outcome = run_team_session(ops, "work", max_turns=30)
    report = replay(outcome.session_id)
    assert report.identical, report.divergence and report.divergence.describe()
    assert report.steps == LlmExchange.objects.filter(session_id=outcome.session_id).count()


def test_no_context_window_means_no_compaction(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"tool_calls": [{"name": "list_teams"}]}}])
    outcome = run_team_session(ops, "work", max_turns=5)
    assert not LlmExchange.objects.filter(session_id=outcome.session_id, kind="compaction")


def test_the_per_message_count_matches_litellms_token_counter():
    from openhive.engine import llm
    from openhive.engine.providers import ProviderProfile

    messages = [
        {"role": "system", "content": "You are the team ops. " * 40},
        {"role": "system", "content": [{"type": "text", "text": "rules " * 30}]},
        {"role": "user", "content": "check the disks please"},
        {"role": "tool", "tool_call_id": "c1", "name": "list_teams", "content": '{"teams": []}'},
        {"role": "assistant", "content": "All good."},
    ]
    for model in ("scripted/x.yaml", "openai/gpt-4o", "anthropic/claude-sonnet-4-5"):
        profile = ProviderProfile("p", model)
        counter = TokenCounter(profile, [])
        assert counter.count(messages) == llm.count_tokens(profile, messages, [])

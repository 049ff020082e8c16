"""Replay: a recorded session re-run with its recorded replies, rolled back; the first
divergence of the request or a tool result is reported at its step."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from openhive.engine.models import Session, ToolCall
from openhive.engine.replay import normalise, reaches_world
from teams.agent import run_team_session
from teams.config import default_config, load_team_config, write_team_config
from tests.engine.replay_support import database_state, replay
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db
QUERY_OPS = {"name": "query_team", "arguments": {"team": "ops", "query": "?"}}

ROUTE = [
    {"when": {"last": "user"}, "reply": {"tool_calls": [{"name": "list_teams"}]}},
    {
        "when": {"last": "tool", "tool": "list_teams"},
        "reply": {
            "tool_calls": [
                {"name": "delegate_task", "arguments": {"team": "ops", "task": "check disks"}}
            ]
        },
    },
    {
        "when": {"last": "tool", "tool": "delegate_task"},
        "reply": {"tool_calls": [{"name": "get_status", "arguments": {"team": "ops"}}]},
    },
    {"when": {"last": "tool", "tool": "get_status"}, "reply": {"content": "Delegated to ops."}},
]


@pytest.fixture
def ops(main_team):
    team = TeamFactory(name="ops", parent=main_team, bootstrapped=True)
    write_team_config(default_config("ops", parent="main"))
    return team


@pytest.fixture
def recorded(ops, scripted_provider):
    scripted_provider(ROUTE)
    outcome = run_team_session(ops.parent, "have ops check the disks")
    assert outcome.ok
    return Session.objects.get(pk=outcome.session_id)


def test_an_unchanged_session_replays_identically(recorded):
    report = replay(recorded.pk)
    assert report.identical, report.divergence and report.divergence.describe()
    assert report.steps == 4 and report.recorded_steps == 4
    assert report.stop_reason == "completed"


def test_a_replay_leaves_the_database_unchanged(recorded):
    before = database_state()
    report = replay(recorded.pk)
    assert report.identical
    assert database_state() == before


def test_a_changed_team_rule_diverges_at_the_first_step_with_a_diff(recorded, openhive_dirs):
    rules = openhive_dirs / "run" / "teams" / "main" / "team-rules"
    rules.mkdir(parents=True, exist_ok=True)
    (rules / "routing.md").write_text("Always ask before delegating.")
    report = replay(recorded.pk)
    assert not report.identical
    assert report.divergence.step == 1
    assert report.divergence.what == "the system prompt differs"
    assert "+Always ask before delegating." in report.divergence.diff


def test_a_changed_config_diverges_at_the_step_whose_tool_result_changed(recorded):
    config = load_team_config("ops")
    write_team_config(config.model_copy(update={"max_concurrent_daily_ops": 9}))
    report = replay(recorded.pk)
    assert report.divergence is not None
    assert report.divergence.step == 3
    assert report.divergence.what == "the result of tool get_status differs"
    assert '"max_concurrent_daily_ops": 9' in report.divergence.diff


def test_a_tool_no_longer_allowed_diverges_in_the_tools_offered(recorded):
    from openhive.core.registry import all_tools

    # Every tool but one: the prompt's tool guidance stays the same, only the offer changes.
    config = load_team_config("main")
    allowed = [spec.name for spec in all_tools() if spec.name != "delegate_task"]
    write_team_config(config.model_copy(update={"allowed_tools": allowed}))
    report = replay(recorded.pk)
    assert report.divergence.step == 1 and report.divergence.what == "the tools offered differ"
    assert '-  "delegate_task",' in report.divergence.diff or "delegate_task" in (
        report.divergence.diff
    )


def test_a_lower_max_turns_makes_the_replay_stop_early(recorded):
    config = load_team_config("main")
    write_team_config(config.model_copy(update={"max_turns": 2}))
    report = replay(recorded.pk)
    assert report.divergence.step == 3
    assert "stopped after 2 model call(s) (max_turns" in report.divergence.what


def test_world_reaching_tools_answer_from_the_record(ops, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "tool_calls": [
                        {"name": "query_team", "arguments": {"team": "ops", "query": "?"}}
                    ]
                },
            },
            {"when": {"team": "ops"}, "reply": {"content": "all good"}},
            {"when": {"last": "tool"}, "reply": {"content": "ops says all good"}},
        ]
    )
    outcome = run_team_session(ops.parent, "ask ops")
    sessions = Session.objects.count()
    # The child's answer would now differ; a replay must not ask it again.
    scripted_provider([{"when": {}, "reply": {"content": "something else"}}])
    report = replay(outcome.session_id)
    assert report.identical and Session.objects.count() == sessions
    assert reaches_world("web_fetch") and reaches_world("mcp__git__log") and reaches_world("bash")
    assert not reaches_world("list_teams")


def test_the_tree_replays_the_child_sessions_too(ops, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"team": "main", "last": "user"},
                "reply": {
                    "tool_calls": [
                        {"name": "query_team", "arguments": {"team": "ops", "query": "?"}}
                    ]
                },
            },
            {"when": {"team": "ops"}, "reply": {"tool_calls": [{"name": "list_teams"}]}},
            {"when": {"team": "ops", "last": "tool"}, "reply": {"content": "none"}},
            {"when": {"team": "main", "last": "tool"}, "reply": {"content": "ops has none"}},
        ]
    )
    outcome = run_team_session(ops.parent, "ask ops")
    child = Session.objects.get(parent_session_id=outcome.session_id)
    assert child.team == ops and child.parent_task_id is None
    report = replay(outcome.session_id, tree=True)
    assert report.identical and [c.session_id for c in report.children] == [child.pk]
    assert report.first_problem() is None


def test_volatile_ids_and_times_do_not_count_as_divergence():
    assert normalise({"task_id": 3, "created_at": "x", "text": "at 2026-01-02T03:04:05Z"}) == {
        "task_id": "<volatile>",
        "created_at": "<volatile>",
        "text": "at <time>",
    }


def test_the_command_exits_0_when_identical_and_1_when_not(recorded, capsys, openhive_dirs):
    call_command("openhive", "replay", str(recorded.pk))
    assert "identical" in capsys.readouterr().out
    rules = openhive_dirs / "run" / "teams" / "main" / "team-rules"
    rules.mkdir(parents=True, exist_ok=True)
    (rules / "new.md").write_text("A new rule.")
    with pytest.raises(SystemExit) as exit_info:
        call_command("openhive", "replay", str(recorded.pk))
    assert exit_info.value.code == 1
    out = capsys.readouterr().out
    assert "DIVERGED at step 1: the system prompt differs" in out and "+A new rule." in out


def test_replay_all_since_prints_a_summary(recorded, capsys):
    call_command("openhive", "replay", "--all", "--since", "2000-01-01")
    out = capsys.readouterr().out
    assert "1 session(s) replayed: 1 identical, 0 diverged" in out
    ToolCall.objects.update(result={"changed": True})
    with pytest.raises(SystemExit):
        call_command("openhive", "replay", "--all", "--since", "2000-01-01")
    assert "0 identical, 1 diverged" in capsys.readouterr().out


def test_an_unknown_session_is_a_clear_error():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="session 999 not found"):
        call_command("openhive", "replay", "999")


def _profile_replay(session_id: int, profile: str):
    from openhive.cli.replay import replay_options
    from openhive.engine.replay import replay_session

    session = Session.objects.select_related("team").get(pk=session_id)
    return replay_session(session, **replay_options(profile))


def test_replay_with_a_profile_reports_where_the_models_choices_differ(
    recorded, scripted_provider, capsys
):
    same = [{**rule} for rule in ROUTE]
    scripted_provider(same, profile="twin")
    assert _profile_replay(recorded.pk, "twin").identical
    changed = [*ROUTE[:2], {"when": {"last": "tool", "tool": "delegate_task"},
                           "reply": {"content": "Done, no need to check."}}]  # fmt: skip
    scripted_provider(changed, profile="other")
    report = _profile_replay(recorded.pk, "other")
    assert report.divergence.step == 3
    assert report.divergence.what == "the model chooses differently"
    assert '"final_text": "Done, no need to check."' in report.divergence.diff
    with pytest.raises(SystemExit):
        call_command("openhive", "replay", str(recorded.pk), "--profile", "other")
    assert "DIVERGED at step 3: the model chooses differently" in capsys.readouterr().out

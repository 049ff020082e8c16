import pytest

from openhive.engine.models import LlmExchange, Session, ToolCall
from tasks.models import Task
from teams.agent import run_team_session
from teams.models import Team


@pytest.mark.django_db
def test_main_agent_spawns_a_team_through_the_scripted_provider(main_team, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"team": "main", "last": "user", "matches": "(?i)spawn .*ops"},
                "reply": {
                    "tool_calls": [
                        {
                            "name": "spawn_team",
                            "arguments": {
                                "name": "ops",
                                "description": "Ops",
                                "scope_accepts": ["ops"],
                            },
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                },
            },
            {"when": {"last": "tool", "tool": "spawn_team"}, "reply": {"content": "Setting up."}},
        ]
    )
    outcome = run_team_session(main_team, "spawn a team called ops")
    assert outcome.ok, outcome.error
    assert outcome.content == "Setting up."
    session = Session.objects.get(pk=outcome.session_id)
    assert session.turns == 2 and session.prompt_tokens == 10
    assert LlmExchange.objects.filter(session=session).count() == 2
    call = ToolCall.objects.get(session=session)
    assert call.tool == "spawn_team" and call.success
    ops = Team.objects.get(name="ops")
    assert ops.parent == main_team
    assert Task.objects.get(team=ops).type == Task.Type.BOOTSTRAP

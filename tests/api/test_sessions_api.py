"""Sessions, the tool-call audit and the overview, through the REST API."""

from __future__ import annotations

import pytest

from teams.agent import run_team_session
from vault.services import vault_store_secret

pytestmark = pytest.mark.django_db


@pytest.fixture
def recorded_session(main_team, scripted_provider):
    scripted_provider(
        [
            {
                "when": {"last": "user"},
                "reply": {
                    "tool_calls": [{"name": "list_teams", "arguments": {}}],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3},
                },
            },
            {"when": {"last": "tool"}, "reply": {"content": "none yet"}},
        ]
    )
    outcome = run_team_session(main_team, "which teams?")
    assert outcome.ok
    return outcome.session_id


def test_sessions_list_shows_stop_reason_and_tokens(api_client, recorded_session):
    body = api_client.get("/api/v1/sessions?team=main").json()
    assert body["count"] == 1
    row = body["items"][0]
    assert row["id"] == recorded_session and row["stop_reason"] == "completed"
    assert row["prompt_tokens"] == 7 and row["tokens"] == 10 and row["turns"] == 2


def test_session_detail_has_every_exchange_and_tool_call(api_client, recorded_session):
    body = api_client.get(f"/api/v1/sessions/{recorded_session}").json()
    assert [e["turn"] for e in body["exchanges"]] == [1, 2]
    assert body["exchanges"][0]["response"]["tool_calls"][0]["function"]["name"] == "list_teams"
    assert [c["tool"] for c in body["tool_calls"]] == ["list_teams"]
    assert body["final_text"] == "none yet"


def test_audit_filters_by_tool_and_outcome(api_client, recorded_session):
    assert api_client.get("/api/v1/audit?tool=list_teams&success=true").json()["count"] == 1
    assert api_client.get("/api/v1/audit?success=false").json()["count"] == 0


def test_audit_never_returns_a_secret_learned_after_the_call(api_client, main_team):
    from openhive.core.context import ToolContext
    from openhive.engine.tool_calls import call_tool

    call_tool(
        ToolContext(team=main_team), "delegate_task", {"team": "x", "task": "use zz-top-secret-9"}
    )
    vault_store_secret(team=main_team, key="K", value="zz-top-secret-9", updated_by="test")
    assert "zz-top-secret-9" not in api_client.get("/api/v1/audit").content.decode()


def test_overview_counts(api_client, recorded_session):
    body = api_client.get("/api/v1/overview").json()
    assert body["teams"] == 1 and body["sessions"] == 1
    assert body["tokens"] == {"prompt": 7, "completion": 3}
    assert body["tasks"]["pending"] == 0 and body["provider_configured"] is True


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/sessions/999999",
        "/api/v1/sessions/notanumber",
        "/api/v1/sessions?kind=bogus",
        "/api/v1/sessions?limit=0",
        "/api/v1/audit?success=perhaps",
        "/api/v1/audit?offset=-1",
    ],
)
def test_bad_session_and_audit_requests_are_4xx_json(api_client, path):
    response = api_client.get(path)
    assert 400 <= response.status_code < 500
    assert "detail" in response.json()


def test_sessions_need_authentication(client):
    assert client.get("/api/v1/sessions").status_code == 401


def test_a_subagent_session_is_listed_with_the_subagent_it_ran_as(
    api_client, main_team, scripted_provider
):
    from openhive.core import paths
    from openhive.org.services import team_spawn

    ops = team_spawn(parent=main_team, name="ops", description="Operations").team
    (paths.team_dir("ops") / "subagents" / "writer.md").write_text(
        "---\ndescription: Writes\n---\nYou write.\n"
    )
    scripted_provider([{"when": {"team": "ops/writer"}, "reply": {"content": "written"}}])
    outcome = run_team_session(ops, "write", subagent="writer")
    assert outcome.ok, outcome.error
    body = api_client.get("/api/v1/sessions?kind=subagent").json()
    assert [(r["id"], r["agent_name"], r["kind"]) for r in body["items"]] == [
        (outcome.session_id, "writer", "subagent")
    ]

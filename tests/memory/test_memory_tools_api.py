"""The doors onto memory: tools through call_tool (never throw, own team only) and REST."""

from __future__ import annotations

import pytest

from memory.models import Memory
from openhive.core.context import ToolContext
from openhive.engine.models import ToolCall
from openhive.engine.tool_calls import call_tool
from tests.api.conftest import api_client, api_token, fast_password_hashing  # noqa: F401

pytestmark = pytest.mark.django_db


def call(team, tool, **arguments):
    return call_tool(ToolContext(team=team, actor=team.name), tool, arguments)


def test_memory_tools_save_list_search_and_delete(ops):
    saved = call(ops, "memory_save", key="deploy", content="Deploy on Fridays.", type="note")
    assert saved["success"] and saved["entry"]["type"] == "decision"
    refused = call(ops, "memory_save", key="deploy", content="Deploy on Mondays.")
    assert refused["success"] is False and "supersede_reason" in refused["error"]
    assert refused["code"] == "SUPERSEDE_REASON_REQUIRED"
    replaced = call(
        ops, "memory_save", key="deploy", content="Deploy on Mondays.", supersede_reason="freeze"
    )
    assert replaced["success"] and replaced["superseded_id"] == saved["entry"]["id"]
    listed = call(ops, "memory_list", type="choice")
    assert [e["content"] for e in listed["entries"]] == ["Deploy on Mondays."]
    found = call(ops, "memory_search", query="when do we deploy", max_results=5)
    assert found["search_mode"] == "hybrid"
    assert {(r["key"], r["status"]) for r in found["results"]} == {
        ("deploy", "active"),
        ("deploy", "superseded"),
    }
    assert found["results"][0]["status"] == "active"
    assert call(ops, "memory_delete", key="deploy") == {"success": True, "deleted": True}
    assert call(ops, "memory_search", query="deploy")["results"] == []
    assert ToolCall.objects.filter(team=ops, tool="memory_save").count() == 3


def test_memory_tools_refuse_bad_input_without_throwing(ops):
    assert call(ops, "memory_save", key="k", content="c", type="gossip")["success"] is False
    assert call(ops, "memory_save", key="", content="c")["code"] == "INVALID_ARGUMENTS"
    assert call(ops, "memory_search", query="x", max_results=500)["success"] is False
    assert call(ops, "memory_list", type="nope")["success"] is False
    assert not Memory.objects.exists()


def test_memory_tools_see_only_the_callers_team(ops, research):
    call(research, "memory_save", key="plan", content="Research plan: crawl the archive.")
    assert call(ops, "memory_list")["entries"] == []
    assert call(ops, "memory_search", query="research plan crawl archive")["results"] == []
    assert call(ops, "memory_delete", key="plan")["deleted"] is False
    assert Memory.objects.get(team=research, key="plan").active


def test_memory_search_tool_says_when_it_is_full_text_only(no_embeddings, ops):
    call(ops, "memory_save", key="deploy", content="Deploy on Fridays.")
    found = call(ops, "memory_search", query="deploy")
    assert found["search_mode"] == "full_text_only" and "full-text" in found["note"]
    assert found["results"][0]["matched"] == "text"


def test_rest_lists_and_searches_one_teams_memory(api_client, ops, research):  # noqa: F811
    call(ops, "memory_save", key="deploy", content="Deploy on Fridays.")
    call(ops, "memory_save", key="deploy", content="Deploy Mondays.", supersede_reason="freeze")
    call(research, "memory_save", key="theirs", content="Deploy research daily.")
    listed = api_client.get("/api/v1/memories", {"team": "ops"}).json()
    assert [m["content"] for m in listed["items"]] == ["Deploy Mondays."]
    every = api_client.get("/api/v1/memories", {"team": "ops", "status": "all"}).json()
    assert every["count"] == 2 and {m["team"] for m in every["items"]} == {"ops"}
    found = api_client.get("/api/v1/memories/search", {"team": "ops", "q": "deploy"}).json()
    assert found["search_mode"] == "hybrid"
    assert {r["memory"]["team"] for r in found["results"]} == {"ops"}
    assert "theirs" not in str(found)
    newest = listed["items"][0]["id"]
    history = api_client.get(f"/api/v1/memories/{newest}/history", {"team": "ops"}).json()
    assert [h["status"] for h in history] == ["active", "superseded"]
    assert history[1]["superseded_by"] == newest


def test_rest_refuses_bad_input_with_json_4xx(api_client, ops):  # noqa: F811
    other = Memory.objects.create(team=ops, key="k", content="c")
    cases = [
        ("/api/v1/memories", {}),
        ("/api/v1/memories", {"team": "nope"}),
        ("/api/v1/memories", {"team": "ops", "type": "gossip"}),
        ("/api/v1/memories/search", {"team": "ops"}),
        ("/api/v1/memories/search", {"team": "ops", "q": "x", "limit": 0}),
        (f"/api/v1/memories/{other.pk}/history", {"team": "research-x"}),
        ("/api/v1/memories/999999999999999999999/history", {"team": "ops"}),
    ]
    for path, params in cases:
        response = api_client.get(path, params)
        assert 400 <= response.status_code < 500, (path, params, response.status_code)
        assert "detail" in response.json()


def test_rest_history_of_another_teams_entry_is_404(api_client, ops, research):  # noqa: F811
    theirs = call(research, "memory_save", key="plan", content="Research plan.")["entry"]["id"]
    response = api_client.get(f"/api/v1/memories/{theirs}/history", {"team": "ops"})
    assert response.status_code == 404
    assert "Research plan" not in response.content.decode()


def test_rest_requires_authentication(client, ops):
    assert client.get("/api/v1/memories", {"team": "ops"}).status_code == 401
    assert client.get("/api/v1/memories/search", {"team": "ops", "q": "x"}).status_code == 401

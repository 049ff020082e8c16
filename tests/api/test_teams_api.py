import pytest

from tests.api.factories import ScopeKeywordFactory
from tests.factories import TaskFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def org(main_team):
    """main → ops → ops-db, and main → sales."""
    ops = TeamFactory(name="ops", parent=main_team, description="Operations", bootstrapped=True)
    TeamFactory(name="ops-db", parent=ops)
    TeamFactory(name="sales", parent=main_team)
    ScopeKeywordFactory(team=ops, keyword="deploy")
    ScopeKeywordFactory(team=ops, keyword="backup")
    TaskFactory.create_batch(2, team=ops)
    TaskFactory(team=ops, status="done")
    return ops


def test_teams_list_is_flat_with_parent_keywords_and_pending_count(api_client, org):
    response = api_client.get("/api/v1/teams")
    assert response.status_code == 200
    teams = {t["name"]: t for t in response.json()}
    assert set(teams) == {"main", "ops", "ops-db", "sales"}
    ops = teams["ops"]
    assert ops["parent"] == "main"
    assert ops["description"] == "Operations"
    assert ops["status"] == "active"
    assert ops["bootstrapped"] is True
    assert ops["keywords"] == ["backup", "deploy"]
    assert ops["pending_tasks"] == 2
    assert ops["created_at"]
    assert teams["main"]["parent"] is None
    assert teams["ops-db"]["parent"] == "ops"


def test_teams_tree_is_nested_from_main(api_client, org):
    response = api_client.get("/api/v1/teams/tree")
    assert response.status_code == 200
    root = response.json()
    assert root["name"] == "main"
    assert [c["name"] for c in root["children"]] == ["ops", "sales"]
    ops = root["children"][0]
    assert ops["pending_tasks"] == 2
    assert ops["keywords"] == ["backup", "deploy"]
    assert [c["name"] for c in ops["children"]] == ["ops-db"]
    assert ops["children"][0]["children"] == []


def test_teams_tree_without_main_is_404(api_client):
    response = api_client.get("/api/v1/teams/tree")
    assert response.status_code == 404
    assert "main" in response.json()["detail"]


def test_team_detail_has_children_and_task_counts(api_client, org):
    response = api_client.get("/api/v1/teams/ops")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "ops"
    assert body["children"] == ["ops-db"]
    assert body["tasks_by_status"]["pending"] == 2
    assert body["tasks_by_status"]["done"] == 1
    assert body["tasks_by_status"]["failed"] == 0


@pytest.mark.parametrize(
    "name", ["nope", "Ops", "ops%20", "%C3%A9quipe", "x" * 500, "..", "%E2%80%AE"]
)
def test_team_detail_of_unknown_or_invalid_name_is_404_json(api_client, org, name):
    response = api_client.get(f"/api/v1/teams/{name}")
    assert response.status_code == 404
    assert "detail" in response.json()

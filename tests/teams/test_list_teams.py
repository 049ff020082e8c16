"""list_teams: a team sees its own children (and, recursively, theirs), never its siblings."""

from __future__ import annotations

import pytest

from openhive.core.context import ToolContext
from openhive.engine.tool_calls import call_tool
from tasks.models import Task
from tasks.services import task_enqueue
from teams.models import ScopeKeyword, Team
from teams.selectors import team_tree
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree(main_team):
    ops = TeamFactory(name="ops", parent=main_team, description="Operations")
    TeamFactory(name="research", parent=main_team, description="Research", bootstrapped=True)
    db = TeamFactory(name="ops-db", parent=ops, description="Databases")
    TeamFactory(name="ops-db-backup", parent=db, description="Backups")
    ScopeKeyword.objects.create(team=ops, keyword="logs")
    ScopeKeyword.objects.create(team=ops, keyword="deploy")
    return main_team, ops, db


def list_teams(team: Team, **arguments) -> dict:
    return call_tool(ToolContext(team=team), "list_teams", arguments)


def test_lists_direct_children_sorted_by_name(tree):
    main, _, _ = tree
    result = list_teams(main)
    assert result["success"] is True
    assert [t["name"] for t in result["teams"]] == ["ops", "research"]
    assert all("children" not in t for t in result["teams"])


def test_entry_shows_description_keywords_status_and_queue(tree):
    main, ops, _ = tree
    task_enqueue(team=ops, text="one")
    task_enqueue(team=ops, text="two")
    done = task_enqueue(team=ops, text="three")
    Task.objects.filter(pk=done.pk).update(status=Task.Status.DONE)
    entries = {t["name"]: t for t in list_teams(main)["teams"]}
    assert entries["ops"] == {
        "name": "ops",
        "description": "Operations",
        "status": "active",
        "bootstrapped": False,
        "keywords": ["deploy", "logs"],
        "pending_tasks": 2,
    }
    assert entries["research"]["bootstrapped"] is True
    assert entries["research"]["pending_tasks"] == 0


def test_recursive_lists_the_whole_subtree(tree):
    main, _, _ = tree
    teams = list_teams(main, recursive=True)["teams"]
    ops = next(t for t in teams if t["name"] == "ops")
    assert [c["name"] for c in ops["children"]] == ["ops-db"]
    assert [c["name"] for c in ops["children"][0]["children"]] == ["ops-db-backup"]
    assert ops["children"][0]["children"][0]["children"] == []


def test_null_recursive_means_not_recursive(tree):
    main, _, _ = tree
    teams = call_tool(ToolContext(team=main), "list_teams", '{"recursive": null}')["teams"]
    assert all("children" not in t for t in teams)


def test_a_child_sees_only_its_own_subtree(tree):
    _, ops, _ = tree
    names = [t["name"] for t in list_teams(ops)["teams"]]
    assert names == ["ops-db"]


def test_a_leaf_team_has_no_children(tree):
    _, _, db = tree
    leaf = Team.objects.get(name="ops-db-backup")
    assert list_teams(leaf) == {"teams": [], "success": True}
    assert len(list_teams(db)["teams"]) == 1


def test_recursion_stops_at_the_depth_limit(main_team):
    parent = main_team
    for i in range(5):
        parent = TeamFactory(name=f"level-{i}", parent=parent)
    tree = team_tree(root=main_team, recursive=True, max_depth=2)
    assert tree[0]["name"] == "level-0"
    assert tree[0]["children"][0]["name"] == "level-1"
    assert "children" not in tree[0]["children"][0]


def test_unknown_argument_is_refused(tree):
    main, _, _ = tree
    result = list_teams(main, depth=3)
    assert result["success"] is False and result["code"] == "INVALID_ARGUMENTS"

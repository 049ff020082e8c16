"""The admin tells one task's story: a real delegated and queried task tree (the scripted
provider, the real runner), read back through the task page, the tree view and a session's
conversation."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from openhive.engine.models import Session
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.config import default_config, write_team_config
from tests.factories import TeamFactory

SECRET = "sk-live-abcdefghijklmnopqrstuvwx"
DELEGATE = {"name": "delegate_task", "arguments": {"team": "ops", "task": "check the disks"}}
QUERY_DB = {"name": "query_team", "arguments": {"team": "db", "query": "how full is /var?"}}
TREE = [
    {"when": {"team": "main", "last": "user"}, "reply": {"tool_calls": [DELEGATE]}},
    {"when": {"team": "main", "last": "tool"}, "reply": {"content": "delegated to ops"}},
    {"when": {"team": "ops", "last": "user"}, "reply": {"tool_calls": [QUERY_DB]}},
    {
        "when": {"team": "ops", "last": "tool"},
        "reply": {
            "content": "Disks are fine.\n<script>alert(1)</script>\nkey " + SECRET,
            "usage": {"prompt_tokens": 200, "completion_tokens": 20, "cost_usd": 0.0125},
        },
    },
    {
        "when": {"team": "db"},
        "reply": {"content": "/var is 41% full", "usage": {"prompt_tokens": 12}},
    },
]


@pytest.fixture
def tree(main_team, scripted_provider) -> dict:
    """main → (delegate) ops → (query) db, every task run to its end."""
    ops = TeamFactory(name="ops", parent=main_team, bootstrapped=True)
    TeamFactory(name="db", parent=ops, bootstrapped=True)
    write_team_config(default_config("ops", parent="main"))
    write_team_config(default_config("db", parent="ops"))
    scripted_provider(TREE)
    root = task_enqueue(team=main_team, text="have ops check the disks")
    assert run_task(root.pk) == "done"
    child = Task.objects.get(team__name="ops")
    assert run_task(child.pk) == "done"
    query = Task.objects.get(team__name="db")
    return {"root": root, "child": child, "query": query}


pytestmark = pytest.mark.django_db(transaction=True)


def _text(response) -> str:
    return response.content.decode()


def test_a_task_page_names_the_task_and_links_parent_children_and_sessions(admin_client, tree):
    child, root, query = tree["child"], tree["root"], tree["query"]
    page = _text(admin_client.get(reverse("admin:tasks_task_change", args=[child.pk])))
    assert f"<h1>Task #{child.pk} · ops · delegate · done</h1>" in page
    # Its parent, its own session, the query it started, with tokens and cost.
    assert reverse("admin:tasks_task_change", args=[root.pk]) in page
    session = Session.objects.get(task=child)
    assert reverse("admin:engine_session_change", args=[session.pk]) in page
    assert reverse("admin:tasks_task_change", args=[query.pk]) in page
    assert "$0.0125" in page
    assert reverse("admin:tasks_task_tree", args=[child.pk]) in page


def test_a_finished_task_is_read_only_and_refuses_a_post(admin_client, tree):
    url = reverse("admin:tasks_task_change", args=[tree["child"].pk])
    page = _text(admin_client.get(url))
    assert 'name="_save"' not in page
    assert admin_client.post(url, {"priority": 0}).status_code == 403
    assert Task.objects.get(pk=tree["child"].pk).priority == Task.Priority.NORMAL


def test_a_pending_task_can_still_be_reprioritised(admin_client, main_team):
    task = task_enqueue(team=main_team, text="later")
    url = reverse("admin:tasks_task_change", args=[task.pk])
    assert 'name="_save"' in _text(admin_client.get(url))
    assert admin_client.post(url, {"priority": 0}).status_code == 302
    assert Task.objects.get(pk=task.pk).priority == Task.Priority.CRITICAL


def test_a_session_page_refuses_a_post(admin_client, tree):
    session = Session.objects.get(task=tree["child"])
    url = reverse("admin:engine_session_change", args=[session.pk])
    assert 'name="_save"' not in _text(admin_client.get(url))
    assert admin_client.post(url, {}).status_code == 403


def test_the_tree_shows_every_task_from_the_root_with_a_timeline(admin_client, tree):
    # Asked from the middle, the tree starts at its root.
    page = _text(admin_client.get(reverse("admin:tasks_task_tree", args=[tree["child"].pk])))
    rows = re.findall(r'data-task="(\d+)" data-depth="(\d+)"', page)
    assert rows == [
        (str(tree["root"].pk), "0"),
        (str(tree["child"].pk), "1"),
        (str(tree["query"].pk), "2"),
    ]
    assert f"Tree of Task #{tree['root'].pk} · main · delegate · done" in page
    # One bar per session of the tree, each placed on the axis by percentage.
    sessions = Session.objects.filter(task__in=[t.pk for t in tree.values()])
    bars = re.findall(r'class="oh-tl-bar (\w+)" style="left: ([\d.]+)%; width: ([\d.]+)%"', page)
    assert len(bars) == sessions.count() == 3
    assert all(kind == "completed" for kind, _, _ in bars)
    assert all(0 <= float(left) <= 100 and 0 < float(width) <= 100 for _, left, width in bars)
    # Whole-tree spend: 200+20 (ops' last step) and more, and its dollars.
    assert "$0.0125" in page


def test_a_child_session_without_a_task_hangs_under_its_task(admin_client, tree):
    parent = Session.objects.get(task=tree["child"])
    loose = Session.objects.create(
        team=parent.team,
        parent_session=parent,
        parent_task=tree["child"],
        kind="task",
        stop_reason="completed",
        prompt_tokens=5,
        completion_tokens=5,
    )
    page = _text(admin_client.get(reverse("admin:tasks_task_tree", args=[tree["root"].pk])))
    assert f'data-session="{loose.pk}"' in page
    story = _text(admin_client.get(reverse("admin:tasks_task_change", args=[tree["child"].pk])))
    assert reverse("admin:engine_session_change", args=[loose.pk]) in story
    session_page = _text(admin_client.get(reverse("admin:engine_session_change", args=[parent.pk])))
    assert "Sessions it started (2)" in session_page  # the db query's session and this one


def test_a_session_reads_as_a_conversation_with_tool_calls(admin_client, tree):
    session = Session.objects.get(task=tree["child"])
    page = _text(admin_client.get(reverse("admin:engine_session_change", args=[session.pk])))
    assert f"<h1>Session #{session.pk} · ops · task · completed</h1>" in page
    roles = re.findall(r'<div class="oh-msg (\w+)" data-role', page)
    # The system prompt (its static and dynamic parts as one), the task, the tool loop.
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    # The call with its arguments, its result, in readable text (no escaped newlines).
    assert 'data-tool="query_team"' in page
    assert "&quot;query&quot;: &quot;how full is /var?&quot;" in page
    assert "/var is 41% full" in page
    assert "\\n" not in page.split('id="conversation"')[1].split("<h2>Record</h2>")[0]
    # Model text is escaped, and a secret never reaches the page.
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert SECRET not in page


def test_the_dashboard_counts_tasks_spend_and_failures(admin_client, tree, main_team):
    failed = task_enqueue(team=main_team, text="doomed")
    Task.objects.filter(pk=failed.pk).update(status="failed", result="the disk is on fire")
    page = _text(admin_client.get(reverse("admin:index")))
    assert 'id="dashboard"' in page
    assert re.search(r'done</span></a></td><td style="text-align:right">3<', page)
    assert "the disk is on fire" in page
    assert "Provider health" in page and "Engine leader" in page
    # django-q2's tables are grouped as internal, after ours.
    assert page.index("Internal: job runner (django-q2)") > page.index("Tasks")

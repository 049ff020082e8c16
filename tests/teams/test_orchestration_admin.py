"""Operator back office for orchestration: org tree page, team shutdown action, task cancel and
requeue actions, team messages."""

from __future__ import annotations

import pytest

from openhive.core import paths
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.services import task_cancel, task_enqueue
from teams.models import Team
from teams.services import teammessage_send
from tests.factories import claim

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree(main_team):
    ops = team_spawn(
        parent=main_team, name="ops", description="Operations", scope_accepts=["ops"]
    ).team
    db = team_spawn(parent=ops, name="ops-db", scope_accepts=["db"]).team
    return main_team, ops, db


def test_org_tree_page_shows_every_team_nested_with_queue_state(admin_client, tree):
    _, ops, _ = tree
    running = task_enqueue(team=ops, text="rotate logs")
    claim(task_id=running.pk, worker="w")
    Task.objects.filter(team=ops, type="bootstrap").update(status="done")
    response = admin_client.get("/admin/teams/team/tree/")
    assert response.status_code == 200
    html = response.content.decode()
    for name, depth in (("main", 0), ("ops", 1), ("ops-db", 2)):
        assert f'data-team="{name}" data-depth="{depth}"' in html
    assert "rotate logs" in html and "1 / 5" in html and "Operations" in html
    assert (
        'href="/admin/teams/team/tree/"' in admin_client.get("/admin/teams/team/").content.decode()
    )


def test_org_tree_page_needs_staff(client, tree):
    assert client.get("/admin/teams/team/tree/").status_code == 302


def test_shutdown_action_removes_the_subtree(
    admin_client, tree, django_capture_on_commit_callbacks
):
    _, ops, _ = tree
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/teams/team/",
            {"action": "shutdown_teams", "_selected_action": [ops.pk]},
            follow=True,
        )
    assert "Shut down: ops-db, ops." in response.content.decode()
    assert list(Team.objects.values_list("name", flat=True)) == ["main"]
    assert not paths.team_dir("ops").exists()


def test_shutdown_action_refuses_main(admin_client, tree):
    main, _, _ = tree
    response = admin_client.post(
        "/admin/teams/team/",
        {"action": "shutdown_teams", "_selected_action": [main.pk]},
        follow=True,
    )
    assert "main team cannot be shut down" in response.content.decode()
    assert Team.objects.count() == 3


def test_requeue_action_queues_a_copy_and_refuses_live_tasks(admin_client, tree):
    _, ops, _ = tree
    cancelled = task_enqueue(team=ops, text="flaky job")
    task_cancel(task_id=cancelled.pk)
    pending = task_enqueue(team=ops, text="waiting")
    response = admin_client.post(
        "/admin/tasks/task/",
        {"action": "requeue_tasks", "_selected_action": [cancelled.pk, pending.pk]},
        follow=True,
    )
    html = response.content.decode()
    copy = Task.objects.get(text="flaky job", status="pending")
    assert f"Queued again as #{copy.pk}." in html
    assert "only failed or cancelled tasks can be requeued" in html
    assert copy.options == {"requeued_from": cancelled.pk}


def test_cancel_action_records_the_stop_reason(admin_client, tree):
    _, ops, _ = tree
    task = task_enqueue(team=ops, text="x")
    admin_client.post(
        "/admin/tasks/task/", {"action": "cancel_tasks", "_selected_action": [task.pk]}
    )
    task.refresh_from_db()
    assert (task.status, task.stop_reason) == ("cancelled", "cancelled")


def test_team_messages_are_visible_to_operators_with_secrets_scrubbed(admin_client, tree):
    from vault.services import vault_store_secret

    _, ops, db = tree
    vault_store_secret(team=ops, key="K", value="very-secret-value-9", updated_by="t")
    message = teammessage_send(sender=db, recipient=ops, content="disk full")
    from teams.models import TeamMessage

    TeamMessage.objects.filter(pk=message.pk).update(content="leak very-secret-value-9")
    html = admin_client.get("/admin/teams/teammessage/").content.decode()
    assert "leak [REDACTED]" in html and "very-secret-value-9" not in html

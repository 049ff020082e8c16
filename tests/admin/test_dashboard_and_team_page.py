"""The admin index's dashboard and a team's page, through the Django client as staff."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from openhive.engine.models import LEADER, EngineLease
from openhive.engine.services import worker_beat, worker_gone
from tasks.models import Task
from teams.config import default_config, write_team_config
from tests.api.factories import SessionFactory
from tests.factories import TaskFactory, TeamFactory

pytestmark = pytest.mark.django_db

SECRET = "sk-live-abcdefghijklmnopqrstuvwx"


def _page(admin_client, url: str) -> str:
    response = admin_client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def _index_queries(admin_client) -> int:
    from openhive.core import scrubbing

    scrubbing.invalidate()  # the scrubber's secret list is reloaded on both runs alike
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get(reverse("admin:index")).status_code == 200
    return len(queries)


def test_the_dashboard_costs_the_same_queries_for_3_or_60_tasks(admin_client, main_team):
    for status in ("done", "failed", "pending"):
        SessionFactory(team=main_team, task=TaskFactory(team=main_team, status=status))
    few = _index_queries(admin_client)
    for i in range(57):
        team = TeamFactory(name=f"t{i % 5}")
        SessionFactory(team=team, task=TaskFactory(team=team, status="failed"))
    assert _index_queries(admin_client) == few


@pytest.fixture
def cluster_stats(settings, tmp_path):
    """The heartbeat cache in this test's own directory (a real file cache, as in serve)."""
    settings.CACHES = {
        **settings.CACHES,
        "cluster-stats": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(tmp_path / "cluster-stats"),
        },
    }


def test_the_dashboard_counts_workers_from_the_cluster_heartbeat(
    admin_client, main_team, cluster_stats
):
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage
    from django_q.status import Stat, Status

    # What a running qcluster saves every second (its Stat is a Status with its worker pids).
    status = Status(pid=4242, cluster_id="c0ffee")
    status.workers, status.status, status.tob = [101, 102, 103], "Idle", timezone.now()
    get_broker().set_stat(Stat.get_key("c0ffee"), SignedPackage.dumps(status, True), 3)
    page = _page(admin_client, reverse("admin:index"))
    assert "Workers alive: <strong>3</strong> in 1 process(es)" in page
    assert ":4242</code>" in page
    assert "No worker reports in" not in page


def test_the_dashboard_counts_pull_workers_from_their_heartbeat(
    admin_client, main_team, cluster_stats
):
    now = timezone.now()
    worker_beat(name="host-b:77", threads=4, busy=1, now=now - timedelta(seconds=60))
    worker_beat(name="host-b:88", threads=2, busy=0, now=now - timedelta(seconds=1))
    stale = _page(admin_client, reverse("admin:index"))
    assert "Workers alive: <strong>2</strong> in 1 process(es)" in stale  # 77 went quiet
    assert "<code>host-b:88</code>" in stale and "worker, 2 thread(s) · idle" in stale
    worker_beat(name="host-b:77", threads=4, busy=1, now=now)
    page = _page(admin_client, reverse("admin:index"))
    assert "Workers alive: <strong>6</strong> in 2 process(es)" in page
    assert "worker, 4 thread(s) · 1 busy" in page
    worker_gone(name="host-b:88")
    worker_gone(name="host-b:77")
    assert "No worker reports in" in _page(admin_client, reverse("admin:index"))


def test_the_dashboard_shows_the_leader_spend_and_missing_workers(
    admin_client, main_team, cluster_stats
):
    now = timezone.now()
    EngineLease.objects.create(
        name=LEADER, holder="host-a:42", acquired_at=now, expires_at=now + timedelta(seconds=30)
    )
    ops = TeamFactory(name="ops")
    SessionFactory(team=ops, prompt_tokens=1000, completion_tokens=234, cost_usd=Decimal("0.5"))
    # Handed out a minute ago and never claimed: nobody is taking work.
    TaskFactory(team=ops, dispatched_at=now - timedelta(minutes=1))
    page = _page(admin_client, reverse("admin:index"))
    assert "host-a:42" in page
    assert "1234" in page and "$0.5000" in page
    assert "No worker reports in" in page
    assert "handed out but not claimed for 30 s" in page


def test_the_dashboard_says_when_no_provider_is_configured(admin_client, main_team):
    page = _page(admin_client, reverse("admin:index"))
    assert "No provider profile is configured." in page


def test_a_failed_tasks_result_on_the_dashboard_is_scrubbed(admin_client, main_team, settings):
    from openhive.core import scrubbing

    scrubbing.remember([SECRET])
    TaskFactory(team=main_team, status=Task.Status.FAILED, result=f"leaked {SECRET}")
    page = _page(admin_client, reverse("admin:index"))
    assert "leaked [REDACTED]" in page
    assert SECRET not in page


def test_a_team_page_shows_config_profile_scope_tools_tasks_and_spend(
    admin_client, main_team, scripted_provider
):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    ops = TeamFactory(name="ops", parent=main_team)
    ops.scope_keywords.create(keyword="disks")
    config = default_config("ops", parent="main", description="Operations")
    config.allowed_tools = ["list_teams", "memory_*"]
    write_team_config(config)
    task = TaskFactory(team=ops, text="check the disks", result="all fine", status="done")
    SessionFactory(team=ops, task=task, prompt_tokens=40, completion_tokens=2, cost_usd=1)
    page = _page(admin_client, reverse("admin:teams_team_change", args=[ops.pk]))
    assert "<h1>Team ops</h1>" in page
    assert "allowed_tools:" in page  # the config.yaml text itself
    assert "scripted/default.yaml" in page and "Usable" in page
    assert '<span class="oh-badge">disks</span>' in page
    assert "<code>list_teams</code>" in page and "<code>memory_search</code>" in page
    assert "<code>delegate_task</code>" not in page
    assert "check the disks" in page and "all fine" in page
    assert "42 tokens · $1.0000" in page


def test_a_team_page_names_a_profile_that_is_not_defined(admin_client, main_team, settings):
    ops = TeamFactory(name="ops", parent=main_team)
    config = default_config("ops", parent="main")
    config.provider_profile = "fast"
    write_team_config(config)
    page = _page(admin_client, reverse("admin:teams_team_change", args=[ops.pk]))
    assert 'id="team-profile"' in page
    assert "oh-bad" in page.split('id="team-profile"')[1].split("</section>")[0]


@pytest.mark.parametrize(
    "label",
    [
        "tasks.task",
        "tasks.orgoplock",
        "engine.session",
        "vault.vaultentry",
        "triggers.triggerconfig",
        "memory.memory",
        "tools.ratelimitbucket",
    ],
)
def test_titles_name_the_team_never_its_id(admin_client, main_team, label):
    from tests.admin.test_admin_pages import MAKERS, _admin_url

    obj = MAKERS[label]()
    page = _page(admin_client, _admin_url(obj, "change"))
    assert obj.team.name in str(obj)
    assert not str(obj).startswith(f"{obj.team_id}:")
    assert str(obj).replace("&", "&amp;").replace("'", "&#x27;") in page


@pytest.mark.parametrize(
    "label", ["engine.session", "engine.llmexchange", "engine.toolcall", "trust.trustauditlog"]
)
def test_records_have_no_save_or_delete_and_refuse_a_post(admin_client, main_team, label):
    from tests.admin.test_admin_pages import MAKERS, _admin_url

    obj = MAKERS[label]()
    url = _admin_url(obj, "change")
    page = _page(admin_client, url)
    assert 'name="_save"' not in page and "deletelink" not in page
    assert admin_client.post(url, {}).status_code == 403
    assert admin_client.post(_admin_url(obj, "delete"), {"post": "yes"}).status_code == 403
    assert type(obj).objects.filter(pk=obj.pk).exists()


@pytest.mark.parametrize("status", ["done", "failed", "cancelled"])
def test_a_finished_task_cannot_be_deleted_from_its_page(admin_client, main_team, status):
    task = TaskFactory(team=main_team, status=status)
    url = reverse("admin:tasks_task_delete", args=[task.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert Task.objects.filter(pk=task.pk).exists()


def test_a_handoff_and_a_requeue_are_named_in_the_story(admin_client, main_team):
    from tasks.orchestration import task_requeue

    ops = TeamFactory(name="ops", parent=main_team)
    parent = TaskFactory(team=ops, status="done")
    # What task_handoff_to_parent stores, queued from the session of `parent`.
    handoff = TaskFactory(
        team=main_team, options={"parent_task_id": parent.pk, "handoff_from": "ops"}
    )
    page = _page(admin_client, reverse("admin:tasks_task_change", args=[parent.pk]))
    assert "<td>handoff</td>" in page
    assert "Handed off by the <code>ops</code> team." in _page(
        admin_client, reverse("admin:tasks_task_change", args=[handoff.pk])
    )
    Task.objects.filter(pk=handoff.pk).update(status="failed")
    again = task_requeue(task_id=handoff.pk, requested_by="test")
    story = _page(admin_client, reverse("admin:tasks_task_change", args=[again.pk]))
    assert "Requeued from" in story
    assert reverse("admin:tasks_task_change", args=[handoff.pk]) in story
    tree = _page(admin_client, reverse("admin:tasks_task_tree", args=[again.pk]))
    assert f'data-task="{again.pk}" data-depth="1"' in tree


def test_the_dashboard_shows_provider_problems_and_tasks_waiting_for_a_provider(
    admin_client, main_team, scripted_provider, openhive_dirs
):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    providers = openhive_dirs / "data" / "config" / "providers.yaml"
    providers.write_text(
        providers.read_text() + "  fast:\n    model: openai/gpt-4.1-mini\n    colour: blue\n"
    )
    TaskFactory(
        team=main_team,
        run_after=timezone.now() + timedelta(minutes=2),
        defer_reason="provider unavailable: 503 from default",
    )
    card = _page(admin_client, reverse("admin:index")).split('id="dash-providers"')[1]
    card = card.split("</section>")[0]
    assert "All profiles usable." not in card
    assert "profile &quot;fast&quot;" in card and "colour" in card
    assert "1 task(s) waiting for a provider: provider unavailable: 503 from default" in card

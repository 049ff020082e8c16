"""The memory back office: hybrid search within a chosen team, supersede history, adding through
the same save rules as the agents."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.models import Memory
from memory.services import memory_save

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:memory_memory_changelist")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_search_box_runs_hybrid_search_in_the_chosen_team(admin_client, ops, research):
    memory_save(team=ops, key="cat", content="The office cat is called Pixel and likes tuna.")
    memory_save(team=ops, key="backups", content="Database backups are kept seven days.")
    memory_save(team=research, key="their-cat", content="Research has a kitten too.")
    response = admin_client.get(CHANGELIST, {"team__id__exact": ops.pk, "q": "kitten pet"})
    assert response.status_code == 200
    shown = [m.key for m in response.context["cl"].result_list]
    assert shown[0] == "cat"  # found by meaning only, best first
    assert "their-cat" not in shown


def test_search_without_a_team_is_a_plain_text_filter(admin_client, ops):
    memory_save(team=ops, key="cat", content="The office cat likes tuna.")
    response = admin_client.get(CHANGELIST, {"q": "kitten"})
    assert list(response.context["cl"].result_list) == []
    response = admin_client.get(CHANGELIST, {"q": "tuna"})
    assert [m.key for m in response.context["cl"].result_list] == ["cat"]


def test_status_filter_and_history_on_the_change_page(admin_client, ops):
    memory_save(team=ops, key="deploy", content="Fridays")
    new = memory_save(team=ops, key="deploy", content="Mondays", supersede_reason="freeze").memory
    superseded = admin_client.get(CHANGELIST, {"status": "superseded"}).context["cl"]
    assert [m.content for m in superseded.result_list] == ["Fridays"]
    page = admin_client.get(reverse("admin:memory_memory_change", args=[new.pk]))
    html = page.content.decode()
    assert "supersede history" in html.lower() and "freeze" in html and "superseded" in html


def test_adding_in_the_admin_follows_the_supersede_rule(admin_client, ops):
    url = reverse("admin:memory_memory_add")
    form = {"team": ops.pk, "key": "deploy", "type": "decision", "content": "Fridays"}
    assert admin_client.post(url, form).status_code == 302
    refused = admin_client.post(url, {**form, "content": "Mondays"})
    assert refused.status_code == 200 and "supersede reason" in refused.content.decode()
    assert Memory.objects.filter(team=ops).count() == 1
    admin_client.post(url, {**form, "content": "Mondays", "supersede_reason": "freeze"})
    active = Memory.objects.get(team=ops, active=True)
    assert active.content == "Mondays" and active.updated_by == "admin:admin"
    assert active.chunks.count() == 1

"""A skill that does not load is visible to the operator (the team's admin page, the team's
API detail, `manage.py openhive status`) with its path and the reason, never a body or a
server path; the team's other skills keep working."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from openhive.core import paths
from teams.config import default_config, write_team_config
from teams.services import team_workspace_scaffold
from tests.api.factories import UserFactory
from tests.factories import TeamFactory
from tests.teams.skill_support import write_skill
from trust.services import api_token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(main_team):
    team = TeamFactory(name="ops", parent=main_team, description="Operations")
    team_workspace_scaffold(paths.team_dir("ops"))
    write_team_config(default_config("ops", parent="main"))
    write_skill("ops", "disk-report")
    write_skill("ops", "pdf-tools", body="Just do it.")
    write_skill("ops", "broken", body="## Required Tools\n- teleport\n")
    return team


@pytest.fixture
def admin_client(client, django_user_model, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


@pytest.fixture
def api_client(settings) -> Client:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    UserFactory(username="operator", is_staff=True)
    _, token = api_token_create(username="operator", name="tests")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def test_the_team_admin_page_lists_skills_and_the_broken_ones(
    admin_client, ops, openhive_dirs, scripted_provider
):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])  # no provider advice on the page
    html = admin_client.get(reverse("admin:teams_team_change", args=(ops.pk,))).content.decode()
    assert "disk-report — Weekly disk report for the ops servers" in html
    assert "pdf-tools — Weekly disk report for the ops servers (warning: no Purpose" in html
    assert (
        '<li class="errornote">skills/broken/SKILL.md: ## Required Tools names unknown '
        "tool(s): teleport" in html
    )
    assert "Write the weekly disk report" not in html  # never a body
    assert str(openhive_dirs) not in html


def test_the_team_api_detail_lists_skills_and_problems(api_client, ops):
    body = api_client.get("/api/v1/teams/ops").json()
    assert [s["name"] for s in body["skills"]] == ["disk-report", "pdf-tools"]
    assert body["skills"][0] == {
        "name": "disk-report",
        "description": "Weekly disk report for the ops servers",
        "path": "skills/disk-report/SKILL.md",
        "required_tools": ["bash", "web_fetch"],
        "warnings": [],
    }
    (problem,) = body["skill_problems"]
    assert problem["path"] == "skills/broken/SKILL.md" and "teleport" in problem["error"]


def test_status_names_the_skills_that_do_not_load(ops):
    out = io.StringIO()
    call_command("openhive", "status", stdout=out)
    text = out.getvalue()
    assert "Skill problems (those skills are not offered):" in text
    assert "ops: skills/broken/SKILL.md: ## Required Tools names unknown tool(s): teleport" in text
    assert "ops: skills/pdf-tools/SKILL.md: warning: no Purpose" in text


def test_the_tool_verb_activates_a_skill_as_the_team(ops):
    out = io.StringIO()
    call_command("openhive", "tool", "ops", "activate_skill", '{"name": "disk-report"}', stdout=out)
    result = json.loads(out.getvalue())
    assert result["success"] and result["skill"] == "disk-report"
    assert "Write the weekly disk report" in result["instructions"]
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("openhive", "tool", "ops", "activate_skill", '{"name": "broken"}', stdout=out)
    assert exit_.value.code == 1
    assert json.loads(out.getvalue())["code"] == "SKILL_INVALID"

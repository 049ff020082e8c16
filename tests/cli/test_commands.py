"""`manage.py openhive <verb>` as an operator uses it."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tasks.models import Task
from teams.models import Team
from trust.services import api_token_authenticate

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("openhive", *args, stdout=out)
    return out.getvalue()


def test_init_demo_creates_config_demo_script_main_team_and_an_admin_with_a_token(
    openhive_dirs, monkeypatch
):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a-long-password-1")
    output = run("init", "--demo", "--username", "boss")
    data = openhive_dirs / "data"
    assert (data / "scripts" / "demo.yaml").is_file()
    assert "scripted/demo.yaml" in (data / "config" / "providers.yaml").read_text()
    assert (data / "config" / "providers.yaml.example").is_file()
    assert Team.objects.filter(name="main").exists()
    token = output.split("API token: ")[1].split()[0]
    assert api_token_authenticate(token).username == "boss"
    assert "a-long-password-1" not in output


def test_init_leaves_an_existing_providers_file_alone(openhive_dirs):
    providers = openhive_dirs / "data" / "config" / "providers.yaml"
    providers.write_text("profiles: {default: {model: openai/gpt-4.1-mini}}\n")
    output = run("init", "--demo", "--no-user")
    assert "left unchanged" in output
    assert "gpt-4.1-mini" in providers.read_text()


def test_tool_verb_prints_the_tool_result_as_json(main_team):
    result = json.loads(run("tool", "main", "list_teams", "{}"))
    assert result == {"teams": [], "success": True}


def test_tool_verb_with_bad_arguments_prints_the_failure_and_exits_nonzero(main_team):
    out = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("openhive", "tool", "main", "spawn_team", "{not json", stdout=out)
    assert exit_info.value.code == 1
    assert json.loads(out.getvalue())["success"] is False


def test_spawn_and_delegate_queue_tasks_with_the_given_priority(main_team):
    assert "bootstrap task" in run("spawn", "ops", "--description", "Operations", "--scope", "a,b")
    ops = Team.objects.get(name="ops")
    assert sorted(ops.scope_keywords.values_list("keyword", flat=True)) == ["a", "b"]
    run("delegate", "ops", "check the disks", "--priority", "high")
    task = Task.objects.get(team=ops, type=Task.Type.DELEGATE)
    assert task.priority == Task.Priority.HIGH and task.text == "check the disks"


def test_delegate_to_an_unknown_team_is_a_clear_command_error(main_team):
    with pytest.raises(CommandError, match='team "ghost" not found'):
        run("delegate", "ghost", "anything")


def test_spawn_with_an_invalid_name_is_a_clear_command_error(main_team):
    with pytest.raises(CommandError, match="lowercase slug"):
        run("spawn", "Not A Slug")


def test_status_shows_the_tree_and_queue(main_team):
    run("spawn", "ops")
    output = run("status")
    assert "main [active, ready]" in output
    assert "ops [active, bootstrapping] pending 1" in output
    assert "Provider configured: no" in output


def test_token_create_for_unknown_user_fails_clearly():
    with pytest.raises(CommandError, match='user "nobody" not found'):
        run("token", "create", "nobody")


def _token_create(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("openhive", "token", "create", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


@pytest.mark.parametrize(
    ("staff", "scope", "rights", "why"),
    [
        (True, None, "operator rights", "boss is staff"),
        (False, None, "chat rights", "boss is not staff"),
        (False, "operator", "operator rights", "granted by --scope operator"),
        (True, "chat", "chat rights", "restricted by --scope chat"),
    ],
)
def test_token_create_says_which_rights_the_token_gives(
    django_user_model, staff, scope, rights, why
):
    from trust.services import api_token_identify

    django_user_model.objects.create_user(username="boss", password="x", is_staff=staff)
    token, said = _token_create("boss", *(["--scope", scope] if scope else []))
    assert f"This token has {rights}" in said and why in said
    identity = api_token_identify(token)
    assert identity.user.username == "boss"
    assert identity.is_operator == (rights == "operator rights")


def test_status_gives_the_real_reason_a_provider_profile_cannot_be_used(main_team, openhive_dirs):
    (openhive_dirs / "data" / "config" / "providers.yaml").write_text(
        "profiles:\n  default: {api_key_env: X}\n"
    )
    output = run("status")
    assert 'Provider configured: no: provider profile "default"' in output
    assert 'missing "model"' in output
    assert "No LLM provider is configured" not in output

"""A misspelt key in a team's config.yaml or in channels.yaml is reported by name at every door
(the task's failure reason, the CLI's tool verb, the admin, the health check and `status`),
and takes down nothing else: the sibling team keeps working."""

from __future__ import annotations

from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from openhive.core import paths
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.config import TeamConfig, config_path

pytestmark = pytest.mark.django_db(transaction=True)

UNKNOWN = 'unknown key "allowed_tool"'
# Every key a team's config.yaml knows, in the order the error lists them.
KNOWN_KEYS = ", ".join(k for k in TeamConfig.model_fields if k != "name")


@pytest.fixture
def teams(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "all good"}}])
    ops = team_spawn(parent=main_team, name="ops", scope_accepts=["ops"]).team
    web = team_spawn(parent=main_team, name="web", scope_accepts=["web"]).team
    Task.objects.all().delete()
    path = config_path("ops")
    config = yaml.safe_load(path.read_text())
    config["allowed_tool"] = config.pop("allowed_tools")
    path.write_text(yaml.safe_dump(config))
    return ops, web


def test_a_task_of_the_misconfigured_team_fails_naming_the_key_and_the_sibling_runs(teams):
    ops, web = teams
    broken = task_enqueue(team=ops, text="check")
    fine = task_enqueue(team=web, text="check")
    assert run_task(broken.pk) == "failed"
    assert run_task(fine.pk) == "done"
    broken.refresh_from_db()
    assert UNKNOWN in broken.result and "known keys: parent, description, allowed_tools" in (
        broken.result
    )


def test_the_cli_tool_verb_names_the_key(teams):
    with pytest.raises(CommandError, match=UNKNOWN):
        call_command("openhive", "tool", "ops", "list_teams", "{}", stdout=StringIO())


def test_health_status_and_admin_name_the_key_without_server_paths(teams, admin_client):
    (paths.config_dir() / "channels.yaml").write_text("trusst:\n  default_policy: deny\n")
    health = Client().get("/api/v1/health").json()
    assert health["config_problems"] == [
        'channels.yaml: unknown key "trusst" (known keys: trust)',
        f'team "ops": config error in teams/ops/config.yaml: {UNKNOWN} (known keys: {KNOWN_KEYS})',
    ]
    assert str(paths.data_dir()) not in str(health)

    out = StringIO()
    call_command("openhive", "status", stdout=out)
    assert "Configuration problems:" in out.getvalue() and UNKNOWN in out.getvalue()

    ops, _ = teams
    page = admin_client.get(f"/admin/teams/team/{ops.pk}/change/").content.decode()
    assert "unknown key &quot;allowed_tool&quot;" in page

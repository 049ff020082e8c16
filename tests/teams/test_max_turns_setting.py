"""OPENHIVE_MAX_TURNS is the turns a team's session gets when its config.yaml sets none, and
what a newly spawned team's config.yaml is written with."""

from __future__ import annotations

import pytest
import yaml

from openhive.core import paths
from openhive.engine.models import Session
from teams.agent import run_team_session
from teams.config import default_config, load_team_config
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db

LIST_FOREVER = [{"when": {}, "reply": {"tool_calls": [{"name": "list_teams"}]}}]


@pytest.fixture
def max_turns_4(settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "DEFAULT_MAX_TURNS": 4}


def test_a_new_team_is_written_with_the_configured_max_turns(max_turns_4):
    assert default_config("ops", parent="main").max_turns == 4
    assert default_config("main", parent=None).max_turns == 200  # the router keeps its room


def test_a_config_without_max_turns_gets_the_setting_and_a_session_stops_there(
    main_team, scripted_provider, max_turns_4
):
    ops = TeamFactory(name="ops", parent=main_team)
    config = paths.team_dir("ops") / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"name": "ops", "parent": "main", "allowed_tools": ["*"]}))
    assert load_team_config("ops").max_turns == 4
    scripted_provider(LIST_FOREVER)
    outcome = run_team_session(ops, "loop")
    session = Session.objects.get(pk=outcome.session_id)
    assert session.stop_reason == "max_turns" and session.turns == 4

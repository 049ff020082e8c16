"""The team config cache: parsed once per content of the file, shared with readers that only
look, copied for callers that change it, and a rewrite is seen at once."""

from __future__ import annotations

from teams.config import default_config, load_team_config, read_team_config, write_team_config


def test_readers_share_one_parse_until_the_file_changes(openhive_dirs):
    write_team_config(default_config("ops", parent="main"))
    first = read_team_config("ops")
    assert read_team_config("ops") is first
    write_team_config(default_config("ops", parent="main").model_copy(update={"max_turns": 7}))
    assert read_team_config("ops") is not first
    assert read_team_config("ops").max_turns == 7


def test_a_loaded_copy_can_be_changed_without_reaching_other_readers(openhive_dirs):
    write_team_config(default_config("ops", parent="main"))
    mine = load_team_config("ops")
    mine.allowed_tools.append("everything")
    mine.max_turns = 1
    shared = read_team_config("ops")
    assert "everything" not in shared.allowed_tools and shared.max_turns != 1
    assert load_team_config("ops") == shared

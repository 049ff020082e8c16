"""Skills in the open Agent Skills layout: loading, validation (one broken skill never breaks
the team), and the prompt's one-line index (never a body)."""

from __future__ import annotations

import os

import pytest

from openhive.core import paths
from teams.agent import agent_spec_for
from teams.config import default_config, load_team_config, write_team_config
from teams.services import team_workspace_scaffold
from teams.skills import MAX_BODY_CHARS, SkillInvalid, SkillNotFound, load_skill, load_skills
from tests.factories import TeamFactory
from tests.teams.skill_support import OUR_BODY, write_skill

pytestmark = pytest.mark.django_db

PUBLISHED = """---
name: pdf-tools
description: Extract text and tables from PDF files. Use when the task mentions PDFs.
license: Apache-2.0
allowed-tools: Bash(python:*) Read
metadata:
  author: example-org
  version: "1.0"
---

# PDF tools

Run `scripts/extract.py <file>` and read `reference.md` for the details.
"""


@pytest.fixture(autouse=True)
def provider(scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])


@pytest.fixture
def ops(main_team):
    team = TeamFactory(name="ops", parent=main_team, description="Operations")
    team_workspace_scaffold(paths.team_dir("ops"))
    write_team_config(default_config("ops", parent="main"))
    return team


def system_prompt(team) -> str:
    spec = agent_spec_for(team)
    return "\n".join(str(m["content"]) for m in spec.system_messages)


def test_a_folder_skill_loads_with_its_description_body_and_required_tools(ops):
    write_skill("ops", "disk-report", files={"scripts/usage.py": "print(1)"})
    skill = load_skill("ops", "disk-report")
    assert skill.description == "Weekly disk report for the ops servers"
    assert skill.body == OUR_BODY.strip()
    assert skill.required_tools == ("bash", "web_fetch")
    assert skill.path == "skills/disk-report/SKILL.md"
    assert skill.folder == paths.team_dir("ops").resolve() / "skills" / "disk-report"
    assert skill.warnings == ()


def test_a_published_agent_skill_loads_unchanged_with_a_warning_only(ops):
    write_skill("ops", "pdf-tools", raw=PUBLISHED)
    skill = load_skill("ops", "pdf-tools")
    assert skill.description.startswith("Extract text and tables from PDF files.")
    assert skill.metadata == {
        "license": "Apache-2.0",
        "allowed-tools": "Bash(python:*) Read",
        "metadata": {"author": "example-org", "version": "1.0"},
    }
    # Our own sections are recommended, not required: a warning, and the skill works.
    assert skill.required_tools == ()
    assert "no Purpose, Steps, Inputs, Outputs, Error Handling section(s)" in skill.warnings[0]


def test_a_single_file_skill_loads_and_has_no_folder(ops):
    write_skill("ops", "triage", single_file=True)
    skill = load_skill("ops", "triage")
    assert skill.path == "skills/triage.md" and skill.folder is None


def test_a_folder_skill_wins_over_a_file_of_the_same_name(ops):
    write_skill("ops", "triage", description="From the folder")
    write_skill("ops", "triage", description="From the file", single_file=True)
    catalog = load_skills("ops")
    assert catalog.skills["triage"].description == "From the folder"
    assert [p.describe() for p in catalog.problems] == [
        "skills/triage.md: ignored: the folder skill wins"
    ]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"raw": "# Just markdown\nno front matter"}, "no front matter"),
        ({"raw": "---\nname: broken\ndescription: x\n# never closed"}, "not closed"),
        ({"raw": "---\nname: broken\ndescription: [unclosed\n---\nbody"}, "not valid YAML"),
        ({"description": None}, "no `description`"),
        ({"front": {"name": "other-name"}}, "`name: other-name` does not match its folder"),
        ({"body": "x" * (MAX_BODY_CHARS + 1)}, f"over the {MAX_BODY_CHARS} a session loads"),
        ({"body": ""}, "the body is empty"),
        (
            {"body": "## Required Tools\n- web_fetch\n- teleport\n"},
            "## Required Tools names unknown tool(s): teleport",
        ),
    ],
)
def test_a_broken_skill_is_reported_and_the_others_still_load(ops, kwargs, error):
    write_skill("ops", "good")
    write_skill("ops", "broken", **kwargs)
    catalog = load_skills("ops")
    assert list(catalog.skills) == ["good"]
    (problem,) = catalog.problems
    assert problem.name == "broken" and problem.path == "skills/broken/SKILL.md"
    assert error in problem.error
    with pytest.raises(SkillInvalid, match='skill "broken" cannot be used'):
        catalog.get("broken")
    # The team still works: its spec builds and lists the good skill.
    assert "- good — Weekly disk report" in system_prompt(ops)


def test_a_skill_name_outside_the_agent_skills_rules_is_refused(ops):
    write_skill("ops", "Disk_Report")
    (problem,) = load_skills("ops").problems
    assert problem.path == "skills/Disk_Report/SKILL.md"
    assert "`Disk_Report` is not a valid skill name" in problem.error


def test_plugin_and_mcp_tools_count_as_known_required_tools(ops):
    write_skill("ops", "crm", body="## Required Tools\n- plugin__crm_lookup\n- mcp__github__pr\n")
    assert load_skill("ops", "crm").required_tools == ("plugin__crm_lookup", "mcp__github__pr")


def test_an_unknown_skill_names_the_available_ones(ops):
    write_skill("ops", "disk-report")
    with pytest.raises(SkillNotFound, match=r'no skill "nope" .*available: disk-report'):
        load_skill("ops", "nope")


def test_a_skill_folder_linking_outside_the_workspace_is_refused(ops, openhive_dirs):
    outside = openhive_dirs / "elsewhere"
    write_skill("ops", "real")
    (outside / "leak").mkdir(parents=True)
    (outside / "leak" / "SKILL.md").write_text(
        "---\nname: leak\ndescription: x\n---\nbody from outside"
    )
    os.symlink(outside / "leak", paths.team_dir("ops") / "skills" / "leak")
    catalog = load_skills("ops")
    assert list(catalog.skills) == ["real"]
    assert "outside the team's workspace" in catalog.problems[0].error


def test_an_edited_skill_is_read_again(ops):
    path = write_skill("ops", "triage", description="First")
    assert load_skill("ops", "triage").description == "First"
    path.write_text(path.read_text().replace("First", "Second, longer"))
    assert load_skill("ops", "triage").description == "Second, longer"


def test_the_prompt_carries_the_index_and_never_a_body(ops):
    write_skill("ops", "disk-report")
    write_skill("ops", "pdf-tools", raw=PUBLISHED)
    write_skill("ops", "broken", description=None)
    prompt = system_prompt(ops)
    assert "## Skills" in prompt
    assert "- disk-report — Weekly disk report for the ops servers" in prompt
    assert "- pdf-tools — Extract text and tables from PDF files." in prompt
    assert "activate_skill(name)" in prompt
    assert "Write the weekly disk report" not in prompt and "scripts/extract.py" not in prompt
    assert "- skills/broken/SKILL.md: the front matter has no `description`" in prompt


def test_no_index_without_skills_or_without_activate_skill(ops):
    assert "## Skills" not in system_prompt(ops)
    write_skill("ops", "disk-report")
    config = load_team_config("ops")
    write_team_config(config.model_copy(update={"allowed_tools": ["bash"]}))
    assert "## Skills" not in system_prompt(ops)


def test_the_main_team_has_no_skills_index(main_team):
    write_skill("main", "disk-report")
    assert "## Skills" not in system_prompt(main_team)

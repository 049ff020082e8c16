"""The system prompt's rule cascade: system → admin → ancestors (root → parent) → own org-rules →
own team-rules, with a byte-stable static prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from openhive.core import paths
from teams.models import Team
from teams.prompt import ancestors, build_system_prompt, load_rules
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def tree(main_team):
    """main → ops → ops-db, with a rule file at every tier."""
    ops = TeamFactory(name="ops", parent=main_team, description="Operations")
    db = TeamFactory(name="ops-db", parent=ops, description="Databases")
    write(paths.admin_rules_dir() / "a-admin.md", "ADMIN RULE")
    write(paths.team_dir("main") / "org-rules" / "r.md", "MAIN ORG RULE")
    write(paths.team_dir("main") / "team-rules" / "r.md", "MAIN TEAM RULE")
    write(paths.team_dir("ops") / "org-rules" / "r.md", "OPS ORG RULE")
    write(paths.team_dir("ops") / "team-rules" / "r.md", "OPS TEAM RULE")
    write(paths.team_dir("ops-db") / "org-rules" / "r.md", "DB ORG RULE")
    write(paths.team_dir("ops-db") / "team-rules" / "r.md", "DB TEAM RULE")
    return main_team, ops, db


def full_text(prompt) -> str:
    return prompt.static_prefix + "\n\n" + prompt.dynamic_suffix


def test_cascade_order_is_system_admin_ancestors_own_org_then_own_team(tree):
    _, _, db = tree
    text = full_text(build_system_prompt(db))
    system_rule = (paths.system_rules_dir() / "00-organisation.md").read_text().strip()
    order = [
        system_rule[:60],
        "ADMIN RULE",
        "MAIN ORG RULE",
        "OPS ORG RULE",
        "DB ORG RULE",
        "DB TEAM RULE",
    ]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)


def test_only_the_own_team_rules_are_included(tree):
    _, _, db = tree
    text = full_text(build_system_prompt(db))
    assert "MAIN TEAM RULE" not in text and "OPS TEAM RULE" not in text


def test_descendants_rules_do_not_reach_a_parent(tree):
    main, ops, _ = tree
    ops_text = full_text(build_system_prompt(ops))
    assert "DB ORG RULE" not in ops_text and "DB TEAM RULE" not in ops_text
    main_text = full_text(build_system_prompt(main))
    assert "OPS ORG RULE" not in main_text and "MAIN TEAM RULE" in main_text


def test_system_and_admin_rules_form_the_static_prefix(tree):
    _, _, db = tree
    prompt = build_system_prompt(db)
    assert prompt.static_prefix.startswith("--- System Rules ---")
    assert "--- Organization Rules ---\n\nADMIN RULE" in prompt.static_prefix
    assert "ORG RULE" not in prompt.static_prefix.replace("ADMIN RULE", "")
    assert "DB TEAM RULE" in prompt.dynamic_suffix


def test_static_prefix_is_identical_for_two_different_teams(tree):
    main, ops, db = tree
    prefixes = {build_system_prompt(t).static_prefix for t in (main, ops, db)}
    assert len(prefixes) == 1
    assert build_system_prompt(ops).dynamic_suffix != build_system_prompt(db).dynamic_suffix


def test_static_prefix_is_byte_stable_between_builds(tree):
    _, ops, _ = tree
    assert build_system_prompt(ops) == build_system_prompt(ops)


def test_rules_are_sorted_by_file_name(main_team):
    rules = paths.admin_rules_dir()
    write(rules / "20-b.md", "SECOND")
    write(rules / "10-a.md", "FIRST")
    write(rules / "30-c.md", "THIRD")
    prefix = build_system_prompt(main_team).static_prefix
    assert prefix.index("FIRST") < prefix.index("SECOND") < prefix.index("THIRD")
    assert load_rules(rules) == ["FIRST", "SECOND", "THIRD"]


def test_only_top_level_markdown_files_are_rules(main_team):
    rules = paths.team_dir("main") / "team-rules"
    write(rules / "top.md", "TOP LEVEL")
    write(rules / "nested" / "deep.md", "NESTED RULE")
    write(rules / "notes.txt", "TEXT FILE")
    (rules / "folder.md").mkdir()
    assert load_rules(rules) == ["TOP LEVEL"]
    text = build_system_prompt(main_team).dynamic_suffix
    assert "TOP LEVEL" in text and "NESTED RULE" not in text and "TEXT FILE" not in text


def test_missing_rule_folders_are_fine(main_team):
    assert load_rules(paths.admin_rules_dir()) == []
    team = TeamFactory(name="bare", parent=main_team)  # no workspace at all
    prompt = build_system_prompt(team)
    assert "--- Organization Rules ---" not in prompt.static_prefix
    assert "Org Rules" not in prompt.dynamic_suffix and "Team Rules" not in prompt.dynamic_suffix
    assert "You are the team `bare`." in prompt.dynamic_suffix


def test_each_section_names_its_source(tree):
    _, _, db = tree
    suffix = build_system_prompt(db).dynamic_suffix
    for header in (
        "--- Org Rules: main ---",
        "--- Org Rules: ops ---",
        "--- Org Rules: ops-db ---",
        "--- Team Rules: ops-db ---",
    ):
        assert header in suffix


def test_role_text_depends_on_main_or_team(tree):
    main, ops, _ = tree
    assert "# Role: main agent" in build_system_prompt(main).dynamic_suffix
    assert "# Role: team" in build_system_prompt(ops).dynamic_suffix
    assert "Description: Operations" in build_system_prompt(ops).dynamic_suffix


def test_topic_is_named_in_the_dynamic_suffix(main_team):
    prompt = build_system_prompt(main_team, topic_name="Billing")
    assert 'within the topic "Billing"' in prompt.dynamic_suffix
    assert "Billing" not in prompt.static_prefix


def test_ancestors_run_root_first_and_survive_a_cycle(tree):
    main, ops, db = tree
    assert ancestors(db) == [main, ops]
    assert ancestors(main) == []
    # A corrupted tree (a cycle, written past the services' checks) must not loop forever.
    Team.objects.filter(pk=main.pk).update(parent=db)
    assert ancestors(db) == [main, ops]
    assert ancestors(ops) == [db, main]


def test_ancestors_of_a_deep_team_take_one_query(tree, django_assert_num_queries):
    db = tree[2]
    deep = db
    for i in range(6):
        deep = TeamFactory(name=f"deep-{i}", parent=deep)
    deep = Team.objects.get(pk=deep.pk)  # nothing of the chain loaded yet
    with django_assert_num_queries(1):
        chain = ancestors(deep)
    assert [t.name for t in chain] == ["main", "ops", "ops-db", *(f"deep-{i}" for i in range(5))]
    # Whole rows, each value as the ORM reads it (a datetime, not the text SQLite stores).
    assert chain[1].description == "Operations"
    assert chain[1].created_at == Team.objects.get(name="ops").created_at


def test_cache_hint_marks_only_the_static_prefix(main_team):
    prompt = build_system_prompt(main_team)
    plain = prompt.messages(cache_hint=False)
    assert plain == [
        {"role": "system", "content": prompt.static_prefix},
        {"role": "system", "content": prompt.dynamic_suffix},
    ]
    hinted = prompt.messages(cache_hint=True)
    assert hinted[0]["content"] == [
        {"type": "text", "text": prompt.static_prefix, "cache_control": {"type": "ephemeral"}}
    ]
    assert hinted[1] == plain[1]


@pytest.mark.django_db
def test_registered_prompt_sections_follow_the_rules_in_their_declared_order(monkeypatch):
    from openhive.core import prompt_sections
    from teams.prompt import build_system_prompt
    from teams.services import team_ensure_main

    monkeypatch.setattr(prompt_sections, "_SECTIONS", {})
    # Declared out of order on purpose: `order`, not registration, decides.
    prompt_sections.prompt_section("second", order=2)(lambda ctx: "## Second")
    prompt_sections.prompt_section("first", order=1)(lambda ctx: f"## First for {ctx.team.name}")
    built = build_system_prompt(team_ensure_main())
    suffix = built.dynamic_suffix
    assert suffix.index("## First for main") < suffix.index("## Second")
    assert "## First" not in built.static_prefix

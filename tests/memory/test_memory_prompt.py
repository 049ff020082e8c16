"""Which memories reach a team's prompt, in which order, and how many."""

from __future__ import annotations

import pytest
import time_machine

from memory.models import Memory
from memory.prompt import render_memory
from memory.selectors import INJECTION_CAP, memory_injectable
from memory.services import memory_delete, memory_save
from teams.prompt import build_system_prompt

pytestmark = pytest.mark.django_db


def test_injected_types_come_in_type_order_then_key_order(ops):
    for key, kind in [
        ("z-context", "context"),
        ("b-lesson", "lesson"),
        ("a-decision", "decision"),
        ("y-identity", "identity"),
        ("a-lesson", "insight"),
        ("ref", "reference"),
        ("old", "historical"),
    ]:
        memory_save(team=ops, key=key, content=f"content of {key}", type=kind)
    entries = memory_injectable(team=ops)
    assert [m.key for m in entries] == [
        "y-identity",
        "a-lesson",
        "b-lesson",
        "a-decision",
        "z-context",
    ]
    text = render_memory(ops)
    assert text.index("[IDENTITY]") < text.index("[LESSON]") < text.index("[DECISION]")
    assert text.index("[DECISION]") < text.index("[CONTEXT]")
    assert "- a-lesson: content of a-lesson" in text
    assert "content of ref" not in text and "content of old" not in text


def test_the_prompt_carries_the_memory_section(ops):
    memory_save(team=ops, key="style", content="Use British spelling.", type="lesson")
    prompt = build_system_prompt(ops)
    assert "## Memory" in prompt.dynamic_suffix
    assert "- style: Use British spelling." in prompt.dynamic_suffix
    assert "Use British spelling" not in prompt.static_prefix


def test_superseded_and_deleted_entries_are_not_injected(ops):
    memory_save(team=ops, key="deploy", content="Fridays", type="decision")
    memory_save(team=ops, key="deploy", content="Mondays", type="decision", supersede_reason="r")
    memory_save(team=ops, key="gone", content="forget me", type="lesson")
    memory_delete(team=ops, key="gone")
    text = render_memory(ops)
    assert "Mondays" in text and "Fridays" not in text and "forget me" not in text


def test_the_cap_keeps_fundamental_types_then_the_most_recent(ops):
    with time_machine.travel("2026-01-01 00:00:00", tick=False) as clock:
        for i in range(45):
            memory_save(team=ops, key=f"ctx-{i:02d}", content=f"context {i}", type="context")
            clock.shift(60)
        for i in range(10):
            memory_save(team=ops, key=f"lesson-{i}", content=f"lesson {i}", type="lesson")
            clock.shift(60)
    entries = memory_injectable(team=ops)
    assert len(entries) == INJECTION_CAP == 50
    kept = [m.key for m in entries]
    assert kept[:10] == [f"lesson-{i}" for i in range(10)]
    # 40 context slots left: the 40 most recently updated, listed by key.
    assert kept[10:] == [f"ctx-{i:02d}" for i in range(5, 45)]
    assert Memory.objects.filter(team=ops, active=True).count() == 55


def test_the_section_is_byte_stable_while_memory_is_unchanged(ops):
    for i in range(5):
        memory_save(team=ops, key=f"k{i}", content=f"value {i}", type="decision")
    first = render_memory(ops)
    memory_save(team=ops, key="k2", content="value 2", type="decision")  # identical: no-op
    assert render_memory(ops) == first


def test_a_team_without_memory_gets_no_section(ops, research):
    memory_save(team=research, key="theirs", content="research only", type="identity")
    assert render_memory(ops) == ""
    assert "research only" not in build_system_prompt(ops).dynamic_suffix

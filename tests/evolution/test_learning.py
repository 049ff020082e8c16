"""A ready learning cycle records its learnings as memories with a confidence, under the limits
code enforces, keeps its journal in the vault, and a later cycle promotes what it corroborates
and supersedes what it contradicts. One cycle runs for real through the worker's run_task and
the scripted provider; the limits are exercised through the tool door."""

from __future__ import annotations

import json

import pytest

from evolution.models import CycleChange, Learning
from evolution.services.changes import change_revert
from memory.models import Memory
from tasks.runner import run_task
from vault.services import vault_read

from .conftest import call, fired_task

URLS = ["https://a.example/1", "https://b.example/2", "https://c.example/3"]


def journal(team) -> dict:
    return json.loads(vault_read(team=team, key="learning:ops:scout:journal").value)


@pytest.mark.django_db(transaction=True)
def test_a_learning_cycle_run_by_the_worker_writes_memories_with_confidence(
    ops, cycle_trigger, scripted_provider
):
    scripted_provider(
        [
            {
                "when": {"team": "ops/scout", "last": "user"},
                "reply": {
                    "tool_calls": [
                        {
                            "name": "record_learning",
                            "arguments": {
                                "topic": "backups",
                                "insight": "Restore tests catch silent backup corruption.",
                                "confidence": "medium",
                                "sources": URLS[:1],
                            },
                        }
                    ]
                },
            },
            {"when": {"team": "ops/scout", "last": "tool"}, "reply": {"content": "Learned 1."}},
        ]
    )
    task = fired_task(cycle_trigger("learning"))
    assert run_task(task.pk) == "done"
    learning = Learning.objects.get()
    assert learning.confidence == "medium" and learning.subagent == "scout"
    memory = Memory.objects.get(key="lesson:scout:backups", active=True)
    assert memory.type == "lesson" and "[medium confidence" in memory.content
    assert "Restore tests" in memory.content and URLS[0] in memory.content
    change = CycleChange.objects.get()
    assert change.kind == "learning" and change.status == "applied" and change.before is None
    assert change.evidence["task_id"] == task.pk and change.evidence["sources"] == URLS[:1]
    (entry,) = journal(ops)["entries"]
    assert entry["learnings"] == [learning.pk] and entry["topics"][0] == "backups"


@pytest.mark.django_db
def test_a_cycle_keeps_at_most_five_learnings(ops, cycle_trigger):
    task = fired_task(cycle_trigger("learning"))
    for i in range(5):
        done = call(ops, "record_learning", task, topic=f"t{i}", insight="x", confidence="medium")
        assert done["success"], done
    refused = call(ops, "record_learning", task, topic="t5", insight="x", confidence="medium")
    assert not refused["success"] and refused["code"] == "LEARNING_CAP"
    assert Learning.objects.count() == 5 and Memory.objects.filter(type="lesson").count() == 5


@pytest.mark.django_db
def test_low_confidence_and_a_poorly_sourced_high_are_refused(ops, cycle_trigger):
    task = fired_task(cycle_trigger("learning"))
    low = call(ops, "record_learning", task, topic="tls", insight="x", confidence="low")
    assert not low["success"] and low["code"] == "LOW_CONFIDENCE"
    high = call(
        ops, "record_learning", task, topic="tls", insight="x", confidence="high", sources=URLS[:2]
    )
    assert not high["success"] and "at least 3" in high["error"]
    assert not Learning.objects.exists() and not Memory.objects.exists()
    ok = call(
        ops, "record_learning", task, topic="tls", insight="x", confidence="high", sources=URLS
    )
    assert ok["success"] and ok["confidence"] == "high"


@pytest.mark.django_db
def test_record_learning_outside_a_cycle_is_refused(ops):
    refused = call(ops, "record_learning", None, topic="tls", insight="x", confidence="medium")
    assert not refused["success"] and refused["code"] == "NOT_IN_CYCLE"


@pytest.mark.django_db
def test_a_later_cycle_promotes_what_it_corroborates_and_supersedes_what_it_contradicts(
    ops, cycle_trigger
):
    trigger = cycle_trigger("learning")
    first = fired_task(trigger)
    for topic in ("disks", "tls"):
        assert call(
            ops,
            "record_learning",
            first,
            topic=topic,
            insight=f"{topic} v1",
            confidence="medium",
            sources=URLS[:2],
        )["success"]
    again = call(ops, "record_learning", first, topic="disks", insight="dup", confidence="medium")
    assert again["code"] == "DUPLICATE_TOPIC"

    second = fired_task(trigger, key="slot-2")
    asked = call(ops, "record_learning", second, topic="disks", insight="v2", confidence="medium")
    assert asked["code"] == "STANCE_REQUIRED" and "disks v1" in asked["error"]
    agreed = call(
        ops,
        "record_learning",
        second,
        topic="disks",
        insight="same",
        confidence="medium",
        sources=URLS[2:],
        stance="agrees",
    )
    assert agreed["outcome"] == "promoted" and agreed["confidence"] == "high"
    disks = Learning.objects.get(topic="disks")
    assert disks.corroborations == 1 and disks.status == "active" and len(disks.sources) == 3
    assert "[high confidence" in Memory.objects.get(key="lesson:scout:disks", active=True).content
    promotion = CycleChange.objects.get(evidence__promoted=True)

    contra = call(
        ops,
        "record_learning",
        second,
        topic="tls",
        insight="tls v2 is wrong",
        confidence="medium",
        stance="contradicts",
    )
    assert contra["outcome"] == "superseded"
    old, new = Learning.objects.filter(topic="tls").order_by("id")
    assert old.status == "superseded" and old.superseded_by_id == new.pk
    old_memory = Memory.objects.get(key="lesson:scout:tls", active=False)
    new_memory = Memory.objects.get(key="lesson:scout:tls", active=True)
    assert old_memory.superseded_by_id == new_memory.pk and "tls v2" in new_memory.content
    entry = journal(ops)["entries"][-1]
    assert entry["promoted"] == [disks.pk] and entry["superseded"] == [old.pk]

    # Reverting the supersession gives the topic back to the old learning and memory text.
    change = CycleChange.objects.get(evidence__supersedes=old.pk)
    change_revert(change_id=change.pk, by="operator")
    old.refresh_from_db()
    assert old.status == "active"
    restored = Memory.objects.get(key="lesson:scout:tls", active=True)
    assert "tls v1" in restored.content
    # Reverting the promotion puts the confidence back.
    change_revert(change_id=promotion.pk, by="operator")
    disks.refresh_from_db()
    assert disks.confidence == "medium" and disks.corroborations == 0
    assert "[medium confidence" in Memory.objects.get(key="lesson:scout:disks", active=True).content


@pytest.mark.django_db
def test_a_known_secret_never_reaches_a_learning_its_memory_or_the_journal(ops, cycle_trigger):
    from openhive.core import scrubbing

    secret = "sk-learn-0123456789abcdefSECRET"
    scrubbing.remember([secret])
    try:
        task = fired_task(cycle_trigger("learning"))
        done = call(
            ops,
            "record_learning",
            task,
            topic="tls",
            insight=f"The key is {secret}.",
            confidence="medium",
            sources=[f"https://x.example/?k={secret}"],
        )
        assert done["success"]
        learning = Learning.objects.get()
        stored = [learning.insight, *learning.sources, learning.memory.content]
        stored += [c.after for c in CycleChange.objects.all()]
        stored.append(vault_read(team=ops, key="learning:ops:scout:journal").value)
        assert all(secret not in text for text in stored)
    finally:
        scrubbing.invalidate()

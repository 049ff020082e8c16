"""CompiledQuery: a queryset compiled once, run with each call's own values."""

from __future__ import annotations

import pytest
from django.db.models import QuerySet

from memory.models import Memory
from memory.selectors import _injectable, memory_injectable
from memory.services import memory_save
from openhive.core.compiled import CompiledQuery
from teams.models import Team
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db


def test_each_call_gets_its_own_values_not_the_first_calls(main_team):
    a, b = TeamFactory(name="alpha", parent=main_team), TeamFactory(name="beta", parent=main_team)
    by_parent = CompiledQuery(lambda parent_id: Team.objects.filter(parent_id=parent_id))
    assert {t.name for t in by_parent.rows(Team, parent_id=main_team.pk)} == {"alpha", "beta"}
    assert by_parent.rows(Team, parent_id=a.pk) == []
    TeamFactory(name="gamma", parent=b)
    assert [t.name for t in by_parent.rows(Team, parent_id=b.pk)] == ["gamma"]


def test_a_value_the_orm_transforms_falls_back_to_compiling_each_time(main_team):
    """A marker that does not reach the parameters as given (a bool here) cannot be placed:
    the query is then compiled at each call, still with the right values."""

    def active(flag: bool) -> QuerySet:
        return Team.objects.filter(bootstrapped=flag)

    query = CompiledQuery(active)
    main_team.bootstrapped = True
    main_team.save()
    assert [t.name for t in query.rows(Team, flag=True)] == ["main"]
    assert query.rows(Team, flag=False) == []


def test_a_teams_prompt_memory_is_its_own_and_matches_the_plain_query(main_team):
    ops, web = TeamFactory(name="ops", parent=main_team), TeamFactory(name="web", parent=main_team)
    for key, kind in [("who", "identity"), ("why", "decision"), ("note", "context")]:
        memory_save(team=ops, key=key, content=f"ops {key}", type=kind)
    memory_save(team=web, key="web-only", content="web", type="lesson")
    got = memory_injectable(team=ops)
    assert [m.key for m in got] == ["who", "why", "note"]
    plain = sorted(_injectable(ops.pk), key=lambda m: (m.type_rank, m.key))
    assert [(m.pk, m.type_rank) for m in got] == [(m.pk, m.type_rank) for m in plain]
    assert [m.key for m in memory_injectable(team=web)] == ["web-only"]
    assert Memory.objects.count() == 4

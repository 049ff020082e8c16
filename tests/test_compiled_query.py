"""CompiledQuery: a queryset compiled once, run with each call's own values."""

from __future__ import annotations

import pytest
from django.db import connection
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


def test_a_text_fields_value_is_placed_in_the_sql_compiled_once(main_team):
    """A text lookup's marker reaches the parameters as its digits: it is placed all the same,
    so the query is not compiled again at each call."""
    TeamFactory(name="alpha", parent=main_team)
    TeamFactory(name="beta", parent=main_team)
    by_name = CompiledQuery(lambda name: Team.objects.filter(name=name))
    assert [t.name for t in by_name.rows(Team, name="alpha")] == ["alpha"]
    assert by_name._compiled[connection.vendor] is not None
    assert [t.name for t in by_name.rows(Team, name="beta")] == ["beta"]


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


def _values(instance, extra=()) -> dict:
    fields = {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}
    return {**fields, **{name: getattr(instance, name) for name in extra}}


def test_rows_are_the_instances_the_orms_raw_query_makes(main_team):
    """Every field as the ORM's own raw query converts it (aware datetimes, JSON, flags,
    decimals), annotations as attributes, the instances saved-state and all."""
    from tasks.models import Task
    from tasks.services import task_enqueue

    task_enqueue(team=main_team, text="one", options={"k": [1, "two", {"x": None}]})
    task_enqueue(team=main_team, text="two", priority=Task.Priority.HIGH)
    query = CompiledQuery(
        lambda team_id: (
            Task.objects.filter(team_id=team_id)
            .select_related(None)
            .extra(select={"doubled": "priority * 2"})
            .order_by("pk")
        )
    )
    sql, params = query.sql(team_id=main_team.pk)
    ours = query.rows(Task, team_id=main_team.pk)
    theirs = list(Task.objects.raw(sql, params))
    assert len(ours) == 2
    assert [_values(t, ["doubled"]) for t in ours] == [_values(t, ["doubled"]) for t in theirs]
    assert ours[0].options == {"k": [1, "two", {"x": None}]}
    assert ours[0].created_at.tzinfo is not None
    assert not ours[0]._state.adding
    ours[1].text = "changed"
    ours[1].save(update_fields=["text"])
    assert Task.objects.get(pk=ours[1].pk).text == "changed"


def test_an_empty_answer_is_one_query(main_team, django_assert_num_queries):
    query = CompiledQuery(lambda parent_id: Team.objects.filter(parent_id=parent_id))
    query.rows(Team, parent_id=main_team.pk)  # compiled
    with django_assert_num_queries(1):
        assert query.rows(Team, parent_id=main_team.pk) == []


def test_rows_made_again_by_the_kept_plan_are_right_for_each_set_of_columns(main_team):
    from openhive.core.compiled import raw_rows

    child = TeamFactory(name="alpha", parent=main_team)
    for _ in range(2):  # the second time by the plan the first made
        rows = raw_rows(Team, "SELECT * FROM teams_team WHERE id = %s", [child.pk])
        assert [(t.name, t.parent_id) for t in rows] == [("alpha", main_team.pk)]
        named = raw_rows(Team, "SELECT id, name, 7 AS seven FROM teams_team WHERE id = %s",
                         [child.pk])  # fmt: skip
        assert [(t.pk, t.name, t.seven) for t in named] == [(child.pk, "alpha", 7)]


def test_a_threads_connection_and_its_row_plans_go_with_the_thread():
    """A plan refers to its connection: kept on the connection itself, it cannot keep the
    connection of a finished thread alive."""
    import gc
    import threading
    import weakref

    from django.db import connections

    from openhive.core.compiled import raw_rows

    seen: list[weakref.ref] = []

    def work() -> None:
        assert [t.pk for t in raw_rows(Team, "SELECT 1 AS id", [])] == [1]
        seen.append(weakref.ref(connections["default"]))
        connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    del thread
    gc.collect()
    assert seen and seen[0]() is None

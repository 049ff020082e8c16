"""A claim reads only the head of the queue, however deep the queue and however stale the
table's statistics (PostgreSQL): the candidates in the order of the pending index, each team's
best tasks from the team's own pending index, the claimed rows by key. Before, a burst of
enqueues made every claim fetch and sort every pending task, and claims slowed down as the
queue grew. A batch of ends, too, finds its tasks by key. The claims' prepared statements
keep to this with the plans they keep, and a claim survives losing them."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from openhive.core.prepared import USES_BEFORE_PREPARE
from tasks.models import Task
from tasks.selectors import dispatched_unclaimed_count, tasks_admissible, tasks_running_count
from tasks.services import task_claim_next, task_enqueue
from tasks.services.admission import task_claim_named
from tasks.services.claims import IN_INDEX_ORDER, task_claim_batch
from tasks.services.finishes import HeldEnd, tasks_finish_held
from tests.factories import TeamFactory, set_cap

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def burst(teams):
    """The table analyzed while its queue was nearly empty, then a burst of 6,000 pending
    tasks: the statistics say a handful are pending."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's planner")
    Task.objects.bulk_create(
        [Task(team=teams[i % 3], text=f"old{i}", status=Task.Status.DONE) for i in range(2000)]
        + [Task(team=teams[i % 3], text=f"p{i}", priority=4) for i in range(10)]
    )
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {Task._meta.db_table}")
    Task.objects.bulk_create(
        [Task(team=teams[i % 3], text=f"t{i}", priority=i % 5) for i in range(6000)],
        batch_size=2000,
    )
    return teams


def _plan(sql: str, *, setting: str = "") -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        if setting:
            cursor.execute(setting)
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_claim_reads_the_candidates_in_index_order_after_a_burst(burst):
    with CaptureQueriesContext(connection) as captured:
        claimed = task_claim_batch(worker="w1", limit=2)
    first = captured.captured_queries[0]["sql"]
    # the settings hold for the claim's transaction only: sent after its BEGIN, SET LOCAL
    assert first.startswith("BEGIN; ") and f"; {IN_INDEX_ORDER};" in first
    plan = _plan(first.split(f"{IN_INDEX_ORDER};", 1)[1], setting=IN_INDEX_ORDER)
    assert "Index Scan using task_pending_claim_idx" in plan and "Bitmap" not in plan, plan
    # the most urgent first: priority 0 of the first teams
    assert [t.priority for t in claimed] == [0, 0]


def test_a_claim_past_a_full_head_finds_each_teams_best_task_in_the_teams_own_index(burst):
    """When the head of the queue names fewer teams with room than the batch takes, every
    team's best task is looked up in the team's pending index: never a scan of the queue."""
    with CaptureQueriesContext(connection) as captured:
        claimed = task_claim_batch(worker="w1", limit=4)  # three teams: fewer than four
    fallback = next(q["sql"] for q in captured.captured_queries if "LIMIT 1" in q["sql"])
    plan = _plan(fallback, setting=IN_INDEX_ORDER)
    assert "task_team_pending_idx" in plan, plan
    assert "Seq Scan on tasks_task" not in plan, plan
    # The teams are read whole (a seq scan the settings price out of reach): that cost must
    # not make the server compile the query (JIT took 135 ms of a 1 ms claim).
    assert "JIT" not in plan, plan
    assert len(claimed) == 4 and {t.priority for t in claimed} == {0}


def test_a_dispatch_tick_reads_the_teams_heads_and_the_handed_out_tasks_never_the_queue(burst):
    """The engine loop's dispatch (django-q2 workers) read every pending task at every tick,
    four times a second (~30 ms a tick with 20,000 queued), and counted running tasks
    through an index of every task ever run."""
    Task.objects.filter(pk__in=Task.objects.filter(priority=0).values("pk")[:2]).update(
        dispatched_at=timezone.now()
    )
    now = timezone.now()
    with CaptureQueriesContext(connection) as captured:
        picked = tasks_admissible(now=now, limit=4)
        assert dispatched_unclaimed_count(now=now) == 2
        assert tasks_running_count() == 0
    handed = 0
    for query in captured.captured_queries:
        plan = _plan(query["sql"])
        assert "Seq Scan on tasks_task" not in plan, plan
        if '"dispatched_at" >' in query["sql"] or "d.dispatched_at >" in query["sql"]:
            handed += 1
            assert "task_pending_handed_idx" in plan, plan
    assert handed == 2  # the teams' room (handed out per team), and the handed-out count
    assert len(picked) == 4
    assert set(Task.objects.filter(pk__in=picked).values_list("priority", flat=True)) == {0}


def test_a_teams_best_pending_task_comes_from_its_own_index(burst):
    with CaptureQueriesContext(connection) as captured:
        claimed = task_claim_next(team_id=burst[1].pk, team_name=burst[1].name, worker="w2")
    update = captured.captured_queries[-1]["sql"].removesuffix("; COMMIT")
    plan = _plan(update)
    assert "task_team_pending_idx" in plan, plan
    assert claimed is not None
    rest = Task.objects.filter(team=burst[1], status=Task.Status.PENDING)
    assert all(
        (t.priority, t.created_at, t.pk) > (claimed.priority, claimed.created_at, claimed.pk)
        for t in rest
    )


def test_a_batch_claim_locks_no_more_of_a_teams_tasks_than_the_batch_takes(burst):
    """Each team's pick locks the rows it reads: with 100 free slots a team had up to 100 of
    its tasks locked (each lock a write) for a batch of 2."""
    for team in burst:
        set_cap(team.name, 100)
    with CaptureQueriesContext(connection) as captured:
        assert len(task_claim_batch(worker="w1", limit=2)) == 2
    update = captured.captured_queries[-1]["sql"].removesuffix("; COMMIT")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {update}")
        plan = cursor.fetchone()[0]
        transaction.set_rollback(True)
    locks = list(_nodes(plan[0]["Plan"], "LockRows"))
    assert locks and all(node["Actual Rows"] <= 2 for node in locks), locks


def _prepared_names(sql: str) -> list[str]:
    return re.findall(r"EXECUTE (oh_[0-9a-f]+)", sql)


def test_a_pull_claim_is_planned_once_and_its_plans_stay_on_the_indexes_as_the_queue_grows(
    teams,
):
    """The batch claim's three statements spent more time being planned than run (0.56 ms
    against 0.24 ms a claim): they are prepared on the connection and planned once, generically.
    A generic plan is kept until the table's statistics change, so one made while the queue
    was nearly empty must not read the table whole once thousands are queued (it did: the
    claiming UPDATE scanned every task for its picks, 2.7 ms a claim with 20,000 queued)."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's planner")
    Task.objects.bulk_create([Task(team=teams[i % 3], text=f"s{i}") for i in range(3)])
    for _ in range(USES_BEFORE_PREPARE + 1):
        claimed = task_claim_batch(worker="w1", limit=2)
        Task.objects.filter(pk__in=[t.pk for t in claimed]).update(
            status=Task.Status.PENDING, lease_owner="", lease_expires_at=None, started_at=None
        )
    Task.objects.bulk_create(
        [Task(team=teams[i % 3], text=f"t{i}", priority=i % 5) for i in range(6000)],
        batch_size=2000,
    )
    with CaptureQueriesContext(connection) as captured:
        claimed = task_claim_batch(worker="w1", limit=2)
    assert [t.priority for t in claimed] == [0, 0]
    queries = [q["sql"] for q in captured.captured_queries]
    names = [name for sql in queries for name in _prepared_names(sql)]
    assert len(queries) == 3 and len(names) == 3, queries
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = ANY(%s)",
            [names],
        )
        counts = cursor.fetchall()
    assert len(counts) == 3 and all(generic > 0 and custom == 0 for generic, custom in counts)
    head = queries[0].split(f"{IN_INDEX_ORDER};", 1)[1]
    plan = _plan(head, setting=IN_INDEX_ORDER)
    assert "Index Scan using task_pending_claim_idx" in plan and "Seq Scan" not in plan, plan
    update = queries[-1].removesuffix("; COMMIT")
    plan = _plan(update, setting=IN_INDEX_ORDER)
    assert _reads_by_key(plan, "q") and "Seq Scan on tasks_task" not in plan, plan
    assert "task_team_pending_idx" in plan, plan


def test_a_named_claims_generic_plan_finds_the_task_it_claims_by_key_after_a_burst(teams):
    """The named claim's UPDATE (a prepared statement) tested the claimed row's status too,
    which let a plan made while the queue was nearly empty reach the row through the pending
    index by its last column: every pending task read at every claim until autovacuum
    analyzed the table (0.56 ms a claim with 20,000 queued)."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's planner")
    for number in range(USES_BEFORE_PREPARE + 6):  # prepared, then planned generically
        task = task_enqueue(team=teams[number % 3], text=f"s{number}")
        assert task_claim_named(task_id=task.pk, worker="w1").task is not None
        Task.objects.filter(pk=task.pk).update(status=Task.Status.DONE)
    Task.objects.bulk_create(
        [Task(team=teams[i % 3], text=f"t{i}", priority=i % 5) for i in range(6000)],
        batch_size=2000,
    )
    task = task_enqueue(team=teams[0], text="named")
    with CaptureQueriesContext(connection) as captured:
        assert task_claim_named(task_id=task.pk, worker="w1").task.pk == task.pk
    update = captured.captured_queries[-1]["sql"].removesuffix("; COMMIT")
    assert update.startswith("EXECUTE oh_"), update
    plan = _plan(update, setting="SET LOCAL plan_cache_mode = force_generic_plan")
    outer = [line for line in plan.splitlines() if "Scan" in line and " on tasks_task  " in line]
    assert outer and all("tasks_task_pkey" in line for line in outer), plan


def test_a_claim_whose_prepared_statements_were_lost_still_claims(teams):
    """A pooler's reset (DISCARD ALL) takes the connection's prepared statements: the claim's
    transaction fails on the first, is rolled back, and the claim is made again, its
    statements prepared anew."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's prepared statements")
    Task.objects.bulk_create([Task(team=teams[i % 3], text=f"s{i}") for i in range(9)])
    for _ in range(USES_BEFORE_PREPARE + 1):
        assert len(task_claim_batch(worker="w1", limit=1)) == 1
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    with CaptureQueriesContext(connection) as captured:
        claimed = task_claim_batch(worker="w1", limit=2)
    assert len(claimed) == 2
    assert Task.objects.filter(status=Task.Status.RUNNING).count() == USES_BEFORE_PREPARE + 3
    assert "ROLLBACK" in [q["sql"] for q in captured.captured_queries]
    assert connection.get_autocommit() and not connection.in_atomic_block


def _reads_by_key(plan: str, alias: str) -> bool:
    """Whether the plan reaches the task table under `alias` through its primary key only."""
    scans = [
        line for line in plan.splitlines() if "Scan" in line and f" on tasks_task {alias}" in line
    ]
    return bool(scans) and all("tasks_task_pkey" in line for line in scans)


def _nodes(node: dict, kind: str):
    if node.get("Node Type") == kind:
        yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child, kind)


def test_the_claiming_update_finds_its_picked_rows_by_primary_key_after_a_burst(burst):
    """The UPDATE joined its picks back to the table with `status = 'pending'`, which the
    pending indexes answer: with statistics saying a handful were pending, the planner hashed
    the picks and scanned every pending task to find them (13,867 rows, 11 ms a claim, in the
    queue benchmark, where a claim took 8 tasks of 8 teams)."""
    more = TeamFactory.create_batch(6)
    Task.objects.bulk_create([Task(team=more[i % 6], text=f"m{i}", priority=0) for i in range(60)])
    # at the head of the queue, so the claim takes from all nine teams
    Task.objects.filter(team__in=more).update(created_at=timezone.now() - timedelta(days=1))
    with CaptureQueriesContext(connection) as captured:  # the default cap of each team
        assert len(task_claim_batch(worker="w1", limit=8)) == 8
    update = captured.captured_queries[-1]["sql"].removesuffix("; COMMIT")
    # Whatever the planner thinks of joins: the picked rows are read by their key.
    plan = _plan(update, setting="SET LOCAL enable_nestloop = off")
    assert _reads_by_key(plan, "q"), plan


def test_a_batch_of_ends_finds_its_tasks_by_key_however_many_have_ended(teams):
    """The group end joined its document (which the planner takes for 100 rows) with the
    running tasks: it read every `running` entry of the team-status index, dead ones of
    every task that ever ran included, a scan that grew with the table."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's planner")
    Task.objects.bulk_create(
        [Task(team=teams[i % 3], text=f"old{i}", status=Task.Status.DONE) for i in range(6000)]
    )
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {Task._meta.db_table}")
    set_cap(teams[0].name, 10)
    Task.objects.bulk_create([Task(team=teams[0], text=f"t{i}") for i in range(4)])
    claimed = task_claim_batch(worker="w1", limit=4)
    ends = [HeldEnd(t, "w1", Task.Status.DONE, "ok", "", timezone.now()) for t in claimed]
    with CaptureQueriesContext(connection) as captured:
        assert all(tasks_finish_held(ends))
    update = next(q["sql"] for q in captured.captured_queries if "jsonb_to_recordset" in q["sql"])
    plan = _plan(update)
    assert _reads_by_key(plan, "t"), plan


@pytest.mark.django_db
def test_a_sqlite_batch_claim_reads_each_teams_head_from_its_pending_index(teams):
    """SQLite's claim read every pending task of the candidate teams and sorted them all, at
    every claim: 3.5 ms a claim with 4,000 queued, 16.6 ms with 20,000 (the queue benchmark
    fell from 935 to 351 tasks a second). Each team's head now comes from its pending index,
    cut at the team's room."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's claim (PostgreSQL's is checked above)")
    Task.objects.bulk_create(
        [Task(team=teams[i % 3], text=f"t{i}", priority=i % 5) for i in range(300)]
    )
    with CaptureQueriesContext(connection) as captured:
        claimed = task_claim_batch(worker="w1", limit=4)
    pick = next(q["sql"] for q in captured.captured_queries if "UNION ALL" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {pick}")
        plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
    assert plan.count("USING INDEX task_team_pending_idx") == 3, plan
    assert "task_team_status_idx" not in plan, plan
    pending = Task.objects.filter(status=Task.Status.PENDING)
    worst_claimed = max((t.priority, t.created_at, t.pk) for t in claimed)
    assert all((t.priority, t.created_at, t.pk) > worst_claimed for t in pending)


@pytest.mark.django_db
def test_a_sqlite_dispatch_tick_counts_running_tasks_team_by_team(teams):
    """Counted at once, SQLite (without statistics) read the whole team-status index: every
    task ever run, at every tick."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's planner (PostgreSQL's is checked above)")
    Task.objects.bulk_create(
        [Task(team=teams[0], text=f"old{i}", status="done") for i in range(50)]
    )
    with CaptureQueriesContext(connection) as captured:
        assert tasks_running_count() == 0
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {captured.captured_queries[0]['sql']}")
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "SEARCH r USING COVERING INDEX task_team_status_idx (team_id=? AND status=?)" in plan

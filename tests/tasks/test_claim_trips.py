"""A pull worker's claim in three round trips on PostgreSQL and a named task's in two (run_task's
reading the task with its team's lock), or one when the dispatcher named the task's team; what
a claim proves saves queries of the task's start: the task is held (the session's first cancel
check, when it comes within CANCEL_FRESH_SECONDS and no stop was asked since, is the claim's),
and whether it has a question to resume (on both databases, and for one named task's claim as
for a batch)."""

from __future__ import annotations

import functools

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from openhive.core.db import NO_FLUSH_WAIT_SET
from openhive.engine import stopping
from tasks.models import Task, UserQuestion
from tasks.runner import run_next_task, run_task, still_held_check
from tasks.services import task_cancel, task_claim_next, task_enqueue
from tasks.services.admission import task_claim_named
from tasks.services.claims import task_claim_batch
from tests.queries import as_written
from tests.tasks.committed import committed_status

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = [{"when": {}, "reply": {"content": "done"}}]


def _cancel_reads(queries: list[dict]) -> int:
    """The still-held reads: by their lease owner, or of it (the two forms of the check)."""
    return sum(
        q["sql"].startswith('SELECT "tasks_task"."lease_owner"')
        or (q["sql"].startswith('SELECT "tasks_task"."id"') and '"lease_owner" =' in q["sql"])
        for q in queries
    )


@pytest.fixture
def fresh(settings):
    def set_fresh(seconds: float) -> None:
        settings.OPENHIVE = {
            **settings.OPENHIVE, "CANCEL_FRESH_SECONDS": seconds, "CANCEL_POLL_SECONDS": 60
        }  # fmt: skip

    return set_fresh


def test_a_session_started_just_after_its_claim_takes_the_claim_as_its_cancel_check(
    teams, scripted_provider, fresh
):
    fresh(60)
    scripted_provider(ANSWER)
    task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        assert run_next_task("w") == "done"
    # Was one, before the model call.
    assert _cancel_reads(as_written(captured.captured_queries)) == 0


def test_a_stale_claim_is_no_cancel_check(teams, scripted_provider, fresh):
    fresh(0)
    scripted_provider(ANSWER)
    task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        assert run_next_task("w") == "done"
    assert _cancel_reads(as_written(captured.captured_queries)) == 1


def test_a_stop_asked_after_the_claim_is_read_at_once(teams, fresh):
    fresh(60)
    task_enqueue(team=teams[0], text="go")
    [task] = task_claim_batch(worker="w1", limit=1)
    check = still_held_check(task.pk, "w1", held=task.held_since)
    task_cancel(task_id=task.pk)  # asks this process's sessions to look (stop_requested)
    assert check() is True
    # Without a stop asked, the claim answers the first read only.
    check = still_held_check(task.pk, "w1", held=(task.held_since[0], stopping.generation()))
    assert check() is False and check() is True


def test_a_task_that_never_paused_is_not_looked_up_for_a_resume(teams, scripted_provider):
    scripted_provider(ANSWER)
    task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        assert run_next_task("w") == "done"
    reads = sum(
        q["sql"].startswith('SELECT "tasks_userquestion"')
        for q in as_written(captured.captured_queries)
    )
    # The claim itself says whether there is a question to resume, on both databases.
    assert reads == 0


def test_the_claim_of_a_task_with_an_open_question_says_so(teams):
    waited, plain = (task_enqueue(team=teams[0], text=t) for t in ("waited", "plain"))
    UserQuestion.objects.create(
        task_id=waited.pk, team=teams[0], kind="question", text="?", state="answered"
    )
    claimed = {t.pk: t for t in task_claim_batch(worker="w1", limit=5)}
    assert claimed[waited.pk].claim_may_resume is True
    assert claimed[plain.pk].claim_may_resume is False
    assert Task.objects.filter(status="running").count() == 2


def test_the_claim_of_one_named_task_says_whether_it_may_resume_and_since_when_it_held(teams):
    waited, plain = (task_enqueue(team=teams[0], text=t) for t in ("waited", "plain"))
    UserQuestion.objects.create(
        task_id=waited.pk, team=teams[0], kind="question", text="?", state="answered"
    )
    claim = functools.partial(task_claim_next, team_id=teams[0].pk, team_name=teams[0].name)
    first = claim(worker="w1", task_id=plain.pk)
    second = claim(worker="w2", task_id=waited.pk)
    assert (first.pk, first.claim_may_resume, first.team) == (plain.pk, False, teams[0])
    assert (second.pk, second.claim_may_resume, second.lease_owner) == (waited.pk, True, "w2")
    assert first.held_since[1] == stopping.generation()
    assert claim(worker="w3", task_id=plain.pk) is None  # already running: not claimed twice


@pytest.fixture
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's claim")


def _idle() -> bool:
    from psycopg import pq

    return connection.connection.info.transaction_status == pq.TransactionStatus.IDLE


def test_a_claim_is_three_round_trips(teams, postgres_only):
    task = task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        [claimed] = task_claim_batch(worker="w1", limit=1)
    sqls = [q["sql"].strip() for q in as_written(captured.captured_queries)]
    # Its BEGIN with the candidates, the teams' lock, its COMMIT with the claim (was five).
    assert len(sqls) == 3 and sqls[0].startswith("BEGIN;") and sqls[2].endswith("; COMMIT")
    assert claimed.pk == task.pk and claimed.team == teams[0] and _idle()
    assert committed_status(task.pk) == "running"


def test_a_claim_of_several_teams_takes_each_ones_tasks_within_its_room(teams, postgres_only):
    from tasks.selectors import team_cap

    queued = {team.name: [task_enqueue(team=team, text=f"{n}") for n in range(3)] for team in teams}
    busy = queued["db"][0]
    Task.objects.filter(pk=busy.pk).update(status="running", lease_owner="other")
    claimed = task_claim_batch(worker="w1", limit=20)
    by_team = {team.name: 0 for team in teams}
    for task in claimed:
        by_team[task.team.name] += 1
        assert task.team == next(t for t in teams if t.pk == task.team_id)
    assert by_team == {
        "ops": min(3, team_cap("ops")),
        "db": min(2, team_cap("db") - 1),
        "web": min(3, team_cap("web")),
    }


def test_a_claim_with_nothing_to_claim_leaves_no_transaction_open(teams, postgres_only):
    assert task_claim_batch(worker="w1", limit=1) == []
    assert _idle()


def test_a_claim_that_fails_midway_rolls_back(teams, postgres_only, monkeypatch):
    from tasks.services import claims

    task = task_enqueue(team=teams[0], text="go")
    monkeypatch.setattr(claims, "lease_until", lambda now: 1 / 0)  # with the teams locked
    with pytest.raises(ZeroDivisionError):
        task_claim_batch(worker="w1", limit=1)
    assert _idle() and committed_status(task.pk) == "pending"
    monkeypatch.undo()
    assert [t.pk for t in task_claim_batch(worker="w2", limit=1)] == [task.pk]


def test_a_named_claim_is_two_round_trips(teams, postgres_only):
    task = task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        claimed = task_claim_next(
            team_id=teams[0].pk, team_name=teams[0].name, worker="w1", task_id=task.pk
        )
    sqls = [q["sql"].strip() for q in as_written(captured.captured_queries)]
    # BEGIN with the team's lock, the claim with its COMMIT (was BEGIN, lock, claim, COMMIT).
    assert len(sqls) == 2 and sqls[0].startswith("BEGIN; ") and sqls[1].endswith("; COMMIT")
    assert (claimed.pk, claimed.team, claimed.lease_owner) == (task.pk, teams[0], "w1") and _idle()
    assert committed_status(task.pk) == "running"


def test_a_named_claim_of_a_team_locked_elsewhere_skips_it_and_leaves_no_transaction(
    teams, postgres_only
):
    import psycopg

    task = task_enqueue(team=teams[0], text="go")
    params = connection.get_connection_params()
    with psycopg.connect(**params) as other, other.transaction():
        other.execute("SELECT 1 FROM teams_team WHERE id = %s FOR UPDATE", [teams[0].pk])
        claim = functools.partial(
            task_claim_next, team_id=teams[0].pk, team_name=teams[0].name, task_id=task.pk
        )
        assert claim(worker="w1", skip_locked=True) is None
        assert _idle() and committed_status(task.pk) == "pending"
    assert claim(worker="w1", skip_locked=True).pk == task.pk  # the lock is gone


def test_a_named_claim_that_fails_midway_rolls_back(teams, postgres_only, monkeypatch):
    from tasks.services import admission

    task = task_enqueue(team=teams[0], text="go")
    claim = functools.partial(
        task_claim_next, team_id=teams[0].pk, team_name=teams[0].name, task_id=task.pk
    )
    monkeypatch.setattr(admission, "lease_until", lambda now: 1 / 0)  # with the team locked
    with pytest.raises(ZeroDivisionError):
        claim(worker="w1")
    assert _idle() and committed_status(task.pk) == "pending"
    monkeypatch.undo()
    assert claim(worker="w2").lease_owner == "w2"


def test_run_task_reads_its_task_with_the_teams_lock_two_round_trips_in_all(
    teams, scripted_provider, postgres_only
):
    scripted_provider(ANSWER)
    task = task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        assert run_task(task.pk) == "done"
    sqls = [q["sql"].strip() for q in as_written(captured.captured_queries)]
    # Was three: the task's team and status read alone, then BEGIN with the lock.
    assert sqls[0].startswith("BEGIN; ") and "SELECT tm.*" in sqls[0]
    assert "FOR UPDATE OF tm" in sqls[0]
    assert sqls[1].endswith("; COMMIT") and sqls[1].startswith("UPDATE")
    assert committed_status(task.pk) == "done" and _idle()


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


CLAIMS = {
    "batch": lambda task, team: task_claim_batch(worker="w1", limit=1)[0],
    "team's best": lambda task, team: task_claim_next(
        team_id=team.pk, team_name=team.name, worker="w1"
    ),
    "named": lambda task, team: task_claim_named(task_id=task.pk, worker="w1").task,
    "named, its team told": lambda task, team: (
        task_claim_named(task_id=task.pk, worker="w1", team=(team.pk, team.name)).task
    ),
}


@pytest.mark.parametrize("sync", [False, True])
@pytest.mark.parametrize("way", list(CLAIMS))
def test_a_claim_commits_without_waiting_for_the_wal_flush_as_a_sessions_rows_do(
    teams, settings, postgres_only, way, sync
):
    settings.OPENHIVE = {**settings.OPENHIVE, "SESSION_SYNC_COMMIT": sync}
    task = task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        claimed = CLAIMS[way](task, teams[0])
    first = as_written(captured.captured_queries)[0]["sql"]
    # In the claim's own transaction (SET LOCAL), sent with its BEGIN: no round trip more.
    assert first.startswith("BEGIN; ")
    assert (NO_FLUSH_WAIT_SET in first) is not sync
    assert claimed.pk == task.pk and committed_status(task.pk) == "running" and _idle()
    assert _synchronous_commit() == "on"  # the next transaction waits as before


def test_a_claim_inside_a_callers_transaction_leaves_the_commit_to_the_caller(teams, postgres_only):
    from django.db import transaction

    task = task_enqueue(team=teams[0], text="go")
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        [claimed] = task_claim_batch(worker="w1", limit=1)
    assert claimed.pk == task.pk and committed_status(task.pk) == "running"
    assert not any("synchronous_commit" in q["sql"] for q in captured.captured_queries)


def _handed_out(teams: list, told_team: bool) -> tuple:
    """run_task's arguments beside the task's id: its team, when the dispatcher told it."""
    return (teams[0].pk, teams[0].name) if told_team else ()


@pytest.mark.parametrize("told_team", [False, True])
@pytest.mark.parametrize("state", ["missing", "running", "cancelled"])
def test_run_task_of_a_task_not_pending_claims_nothing_and_holds_no_lock(
    teams, postgres_only, state, told_team
):
    task = task_enqueue(team=teams[0], text="go")
    if state == "running":
        Task.objects.filter(pk=task.pk).update(status="running", lease_owner="other")
    elif state == "cancelled":
        task_cancel(task_id=task.pk)
    task_id = task.pk + (1000 if state == "missing" else 0)
    assert run_task(task_id, *_handed_out(teams, told_team)) == "not-claimed"
    assert _idle() and committed_status(task.pk) == ("pending" if state == "missing" else state)
    assert Task.objects.get(pk=task.pk).lease_owner == ("other" if state == "running" else "")


@pytest.mark.parametrize("told_team", [False, True])
def test_run_task_of_a_full_team_hands_the_task_out_again(teams, postgres_only, told_team):
    from django.utils import timezone

    from tasks.selectors import DEFAULT_CAP

    for n in range(DEFAULT_CAP):
        running = task_enqueue(team=teams[0], text=f"busy {n}")
        Task.objects.filter(pk=running.pk).update(status="running", lease_owner="other")
    task = task_enqueue(team=teams[0], text="go")
    Task.objects.filter(pk=task.pk).update(dispatched_at=timezone.now())
    assert run_task(task.pk, *_handed_out(teams, told_team)) == "not-admitted"
    assert _idle() and committed_status(task.pk) == "pending"
    assert Task.objects.get(pk=task.pk).dispatched_at is None  # handed out again


# --- a task handed out with its team: the claim in one round trip ---------------------------


def test_run_task_told_its_team_claims_it_in_one_round_trip_and_runs_it(
    teams, scripted_provider, postgres_only
):
    scripted_provider(ANSWER)
    task = task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        assert run_task(task.pk, teams[0].pk, teams[0].name) == "done"
    sqls = [q["sql"].strip() for q in as_written(captured.captured_queries)]
    # The BEGIN, the team's lock, the claiming UPDATE and the COMMIT: one query (was two).
    assert sqls[0].startswith("BEGIN; ") and "SELECT tm.*" in sqls[0]
    assert "FOR UPDATE OF tm" in sqls[0]
    assert "UPDATE" in sqls[0] and sqls[0].endswith("; COMMIT")
    assert not any(sql.startswith("UPDATE") and sql.endswith("; COMMIT") for sql in sqls[1:])
    assert committed_status(task.pk) == "done" and _idle()
    assert Task.objects.get(pk=task.pk).attempts == 1


def test_a_one_trip_claim_says_what_it_read_of_the_task(teams, postgres_only):
    from tasks.services.admission import task_claim_named

    task = task_enqueue(team=teams[0], text="go", options={"trace": {"traceparent": "x"}})
    claim = task_claim_named(task_id=task.pk, worker="w1", team=(teams[0].pk, teams[0].name))
    assert claim.found and claim.team_name == teams[0].name
    assert claim.options["trace"] == {"traceparent": "x"}
    assert (claim.task.pk, claim.task.team, claim.task.lease_owner) == (task.pk, teams[0], "w1")
    assert claim.task.held_since[1] == stopping.generation() and _idle()


def test_a_task_handed_out_with_another_teams_id_is_claimed_with_its_own_team(teams, postgres_only):
    from tasks.services.admission import task_claim_named

    task = task_enqueue(team=teams[0], text="go")
    with CaptureQueriesContext(connection) as captured:
        claim = task_claim_named(task_id=task.pk, worker="w1", team=(teams[1].pk, teams[1].name))
    # The one-trip claim found nothing in that team; the usual two trips claimed it.
    assert len(captured.captured_queries) == 3
    assert (claim.task.pk, claim.task.team, claim.team_name) == (task.pk, teams[0], "ops")
    assert committed_status(task.pk) == "running" and _idle()


def test_one_trip_claims_racing_for_one_team_never_pass_its_cap(teams, postgres_only):
    """The UPDATE after the lock, in the same query, sees the claims committed before the lock
    was granted: however the workers interleave, the team runs at most its cap."""
    import threading

    from tasks.selectors import DEFAULT_CAP
    from tasks.services.admission import task_claim_named

    tasks = [task_enqueue(team=teams[0], text=f"t{n}") for n in range(DEFAULT_CAP * 4)]
    start = threading.Barrier(len(tasks))
    claimed: list[int] = []

    def claim(task: Task) -> None:
        try:
            start.wait(timeout=10)
            got = task_claim_named(
                task_id=task.pk, worker=f"w{task.pk}", team=(teams[0].pk, teams[0].name)
            )
            if got.task is not None:
                claimed.append(got.task.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(task,)) for task in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(claimed) == DEFAULT_CAP
    assert Task.objects.filter(team=teams[0], status="running").count() == DEFAULT_CAP

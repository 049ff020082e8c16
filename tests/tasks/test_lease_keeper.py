"""The lease keeper thread: woken by a new run only when that run's renewal is due before
anything it already waits for; a run due sooner is renewed in time."""

from __future__ import annotations

import time

import pytest

from tasks import leases


@pytest.fixture(autouse=True)
def fresh_schedule(monkeypatch):
    """No renewal left due by an earlier test's runs: what the keeper waits for is ours."""
    monkeypatch.setattr(leases, "_due", [])
    monkeypatch.setattr(leases, "_held", {})


def test_the_keeper_is_woken_only_for_a_renewal_due_before_the_ones_it_waits_for(
    settings, monkeypatch
):
    wakes: list[int] = []
    notify = leases._lock.notify
    monkeypatch.setattr(leases._lock, "notify", lambda n=1: (wakes.append(n), notify(n)))
    monkeypatch.setattr(leases, "task_renew_lease", lambda **kwargs: True)
    settings.OPENHIVE = {**settings.OPENHIVE, "LEASE_SECONDS": 3}
    with leases.renewed(10_001, "w"):  # due in 1 s: sooner than anything waiting
        assert len(wakes) == 1
        with leases.renewed(10_002, "w"):  # due just after: the keeper wakes in time anyway
            assert len(wakes) == 1


def test_a_run_due_sooner_than_the_keepers_wait_is_renewed_in_time(settings, monkeypatch):
    renewed: list[int] = []
    monkeypatch.setattr(
        leases, "task_renew_lease", lambda *, task_id, worker: renewed.append(task_id) or True
    )
    settings.OPENHIVE = {**settings.OPENHIVE, "LEASE_SECONDS": 600}
    with leases.renewed(20_001, "w"):  # the keeper now waits 200 s
        settings.OPENHIVE = {**settings.OPENHIVE, "LEASE_SECONDS": 3}
        with leases.renewed(20_002, "w"):  # due in 1 s
            deadline = time.monotonic() + 5
            while 20_002 not in renewed and time.monotonic() < deadline:
                time.sleep(0.05)
    assert 20_002 in renewed and 20_001 not in renewed


def test_quick_runs_that_ended_cost_the_keeper_one_wake_together_not_one_each(
    settings, monkeypatch
):
    # Each run leaves its renewal behind when it ends, due an interval after it began; on a
    # queue of quick tasks, one wake per entry was a wake (and a take of the GIL from the
    # running session) per task.
    renewed: list[int] = []
    monkeypatch.setattr(
        leases, "task_renew_lease", lambda *, task_id, worker: renewed.append(task_id) or True
    )
    settings.OPENHIVE = {**settings.OPENHIVE, "LEASE_SECONDS": 3}  # due 1 s after each start
    before = leases.wakes
    with leases.renewed(30_000, "w"):  # a long run, renewed meanwhile
        for number in range(1, 21):
            with leases.renewed(30_000 + number, "w"):
                pass
        deadline = time.monotonic() + 3
        while 30_000 not in renewed and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # past the last quick run's due time
        # The long run's renewal and the twenty quick runs' leftovers: one wake.
        assert renewed == [30_000]
        assert leases.wakes - before == 1

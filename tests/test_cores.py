"""Keeping a hand-over between threads on one core (openhive.core.cores): a thread is moved to
a core at once and left free to move again, a handed-over session loop starts on the core
its caller waits on, and the caller resumes on the core the loop ended on."""

from __future__ import annotations

import os
import threading

import pytest

from openhive.core import cores
from openhive.engine import handover

linux_with_two_cores = pytest.mark.skipif(
    cores.current_cpu() is None or len(os.sched_getaffinity(0)) < 2,
    reason="needs sched_getcpu and two usable cores",
)


@linux_with_two_cores
def test_a_thread_moved_to_another_core_runs_there_and_may_move_again():
    allowed = os.sched_getaffinity(0)
    results: list[tuple[int, int | None, set[int]]] = []

    def moved_once() -> None:
        # Another core each time: without the move the thread would stay where it is. The
        # scheduler may move it again at any moment (other suites share the cores), so one of
        # a few tries must see it there.
        for _ in range(5):
            here = cores.current_cpu()
            target = next(cpu for cpu in sorted(allowed) if cpu != here)
            cores.move_to(target)
            results.append((target, cores.current_cpu(), os.sched_getaffinity(0)))

    thread = threading.Thread(target=moved_once)
    thread.start()
    thread.join(10)
    assert any(target == now for target, now, _mask in results), results
    # Never left pinned: the scheduler stays free to move it.
    assert all(mask == allowed for _target, _now, mask in results)


def test_moving_narrows_the_affinity_to_the_core_then_widens_it_to_what_it_was(monkeypatch):
    calls: list[set[int]] = []
    monkeypatch.setattr(cores, "_enabled", [True])
    monkeypatch.setattr(cores, "_getcpu", lambda: 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 3})
    monkeypatch.setattr(os, "sched_setaffinity", lambda _pid, mask: calls.append(set(mask)))
    cores.move_to(3)
    assert calls == [{3}, {0, 1, 3}]
    calls.clear()
    cores.move_to(0)  # already there
    cores.move_to(2)  # not a core this process may use
    cores.move_to(None)
    assert calls == []


def test_a_refused_move_turns_moving_off_and_changes_nothing(monkeypatch):
    def refused(_pid, _mask):
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(cores, "_enabled", [True])
    monkeypatch.setattr(cores, "_getcpu", lambda: 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(os, "sched_setaffinity", refused)
    cores.move_to(1)
    assert cores._enabled == [False]
    assert cores.current_cpu() is None
    cores.move_to(1)  # no second try


def test_a_handed_over_loop_starts_on_its_callers_core_and_the_caller_resumes_where_it_ended(
    monkeypatch,
):
    moves: list[tuple[str, int | None]] = []
    where = {"caller": 4, "loop": 7}
    caller = threading.get_ident()

    def on_core() -> int:
        return where["caller"] if threading.get_ident() == caller else where["loop"]

    def move_to(cpu: int | None) -> None:
        moves.append(("caller" if threading.get_ident() == caller else "loop", cpu))

    monkeypatch.setattr(cores, "current_cpu", on_core)
    monkeypatch.setattr(cores, "move_to", move_to)

    def loop() -> str:
        assert threading.get_ident() != caller
        where["loop"] = 5  # the scheduler moved it meanwhile
        return "done"

    result = handover.run_watched(loop, handover.Watch(), poll=1, check=lambda: None)
    assert result == "done"
    assert moves == [("loop", 4), ("caller", 5)]

"""The pool of threads that session loops are handed to."""

from __future__ import annotations

import os
import threading

from openhive.engine import callpool


def _run(job_result: list[str]) -> bool:
    done = threading.Event()

    def job() -> None:
        job_result.append(threading.current_thread().name)
        done.set()

    callpool.submit(job)
    return done.wait(5)


def _pool_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "session-loop")


def test_a_thread_that_finished_a_job_runs_the_next_one():
    assert _run([])
    before = _pool_threads()
    names: list[str] = []
    assert _run(names)
    assert names == ["session-loop"] and _pool_threads() == before


def test_a_forked_child_runs_its_jobs_on_threads_of_its_own():
    """The parent's idle threads do not exist in a forked child: a job handed over there
    must start a thread rather than wait for one that will never come."""
    assert _run([])  # the parent now has an idle thread
    pid = os.fork()
    if pid == 0:  # the child
        os._exit(0 if _run([]) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

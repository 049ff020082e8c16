"""Query fan-out threads: a thread that ran a child waits a while for the next one with its
database connection open (a new PostgreSQL connection per child cost a fan-out ~0.2 s), keeps
that connection only when it is clean, and closes it when it ends."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest
from django.db import connection, transaction

from tasks import querypool

pytestmark = pytest.mark.django_db(transaction=True)

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="")


@pytest.fixture
def kept(settings):
    settings.OPENHIVE = {**settings.OPENHIVE, "QUERY_THREAD_IDLE_SECONDS": 30}
    yield
    querypool.shutdown()


def settle(threads: int) -> None:
    """A child's result reaches the caller just before its thread files itself as idle."""
    deadline = time.monotonic() + 5
    while len(querypool._idle) < threads and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(querypool._idle) >= threads


def at_once(n: int):
    """n children that run at the same time, so that each gets a thread of its own."""
    barrier = threading.Barrier(n, timeout=10)

    def child() -> tuple[int, object]:
        barrier.wait()
        return where()

    return [child] * n


def where() -> tuple[int, object]:
    """This thread and its connection (the object itself, so its id is never reused)."""
    connection.ensure_connection()
    return threading.get_ident(), connection.connection


def test_results_come_in_order_in_the_caller_s_context_and_errors_reach_the_caller():
    MARK.set("parent")

    def boom() -> None:
        raise ValueError("child failed")

    assert querypool.run_parallel([lambda: 1, lambda: MARK.get(), lambda: 3]) == [1, "parent", 3]
    with pytest.raises(ValueError, match="child failed"):
        querypool.run_parallel([lambda: 1, boom])


def test_a_second_fan_out_reuses_the_threads_and_their_connections(kept):
    first = set(querypool.run_parallel(at_once(3)))
    settle(3)
    second = set(querypool.run_parallel(at_once(3)))
    assert len(first) == 3
    assert second == first


def test_a_fan_out_larger_than_the_idle_threads_starts_more_at_once(kept):
    first = set(querypool.run_parallel(at_once(2)))
    settle(2)
    barrier = threading.Barrier(4, timeout=10)

    def together() -> tuple[int, object]:
        barrier.wait()  # all four run at the same time, or this times out
        return where()

    second = set(querypool.run_parallel([together] * 4))
    assert len(second) == 4 and first < second


def test_a_connection_left_in_a_transaction_is_closed_not_handed_on(kept):
    def leave_open() -> tuple[int, object]:
        place = where()
        transaction.set_autocommit(False)
        return place

    (first,) = querypool.run_parallel([leave_open])
    settle(1)
    (second,) = querypool.run_parallel([where])
    assert second[0] == first[0]  # the same thread
    assert second[1] is not first[1]  # with a new connection


def test_with_no_idle_time_a_fan_out_s_threads_end_with_it():
    seen = []

    def remember() -> None:
        seen.append(threading.current_thread())

    querypool.run_parallel([remember, remember])
    for thread in seen:
        thread.join(timeout=5)
    assert not any(thread.is_alive() for thread in seen)
    assert querypool._idle == []


def test_shutdown_ends_idle_threads(kept):
    seen = []

    def remember() -> None:
        seen.append(threading.current_thread())

    querypool.run_parallel([remember, remember])
    querypool.shutdown()
    assert not any(thread.is_alive() for thread in seen)

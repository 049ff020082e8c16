"""openhive.core.heap.pause_collections: automatic garbage collection off for a while (a chat
burst's acks), always back on afterwards."""

from __future__ import annotations

import gc
import os
import threading
import time

import pytest

from openhive.core.heap import pause_collections, start_pause_keeper

pytestmark = pytest.mark.usefixtures("collections_unpaused")


def test_a_pause_turns_collection_off_until_it_ends():
    pause = pause_collections(30)
    assert gc.isenabled() is False
    pause.end()
    assert gc.isenabled() is True
    pause.end()  # ending twice changes nothing
    assert gc.isenabled() is True


def test_overlapping_pauses_keep_collection_off_until_the_last_ends():
    first, second = pause_collections(30), pause_collections(30)
    first.end()
    assert gc.isenabled() is False
    second.end()
    assert gc.isenabled() is True


def test_a_pause_nobody_ends_runs_out_by_itself():
    pause_collections(0.05)
    assert gc.isenabled() is False
    deadline = time.monotonic() + 5
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gc.isenabled() is True


def test_collection_turned_off_before_a_pause_stays_off_after_it():
    gc.disable()
    pause_collections(30).end()
    assert gc.isenabled() is False


def test_pauses_after_the_first_start_no_thread_of_their_own():
    """The event loop that pauses collections for a burst must not wait for a new thread to
    start: the bounds are kept by one thread, however many pauses come and go."""
    pause_collections(30).end()
    threads = threading.active_count()
    pauses = [pause_collections(30) for _ in range(5)]
    assert threading.active_count() == threads
    for pause in pauses:
        pause.end()
    assert gc.isenabled() is True
    start_pause_keeper()  # as a server does when it starts listening: still the one thread
    keepers = [t for t in threading.enumerate() if t.name == "collection-pause"]
    assert len(keepers) == 1


def test_the_soonest_bound_ends_its_pause_while_a_later_one_keeps_collection_off():
    later = pause_collections(30)
    sooner = pause_collections(0.05)
    deadline = time.monotonic() + 5
    while not sooner.ended and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sooner.ended and not later.ended
    assert gc.isenabled() is False
    later.end()
    assert gc.isenabled() is True


def test_a_forked_child_does_not_inherit_its_parents_pause():
    read, write = os.pipe()
    pause = pause_collections(30)
    try:
        child = os.fork()
        if child == 0:  # the child reports whether it collects, then leaves at once
            os.write(write, b"1" if gc.isenabled() else b"0")
            os._exit(0)
        os.waitpid(child, 0)
        assert os.read(read, 1) == b"1"
        assert gc.isenabled() is False  # the parent's pause goes on
    finally:
        pause.end()
        os.close(read)
        os.close(write)
    assert gc.isenabled() is True

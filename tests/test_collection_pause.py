"""openhive.core.heap.pause_collections: automatic garbage collection off for a while (a chat
burst's acks), always back on afterwards."""

from __future__ import annotations

import gc
import time

import pytest

from openhive.core.heap import pause_collections

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

"""Acks that never wait for model work, a bounded number of messages in flight per socket, and
the turn host process that runs turns off the web process."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from openhive.chat import turnpool
from openhive.chat.models import Message
from openhive.engine import scripted
from trust.services import api_token_create

from .conftest import connect, drain, receive_until

pytestmark = pytest.mark.usefixtures("fast_hashing")


@pytest.fixture
def token(django_user_model) -> str:
    django_user_model.objects.create_user(username="alice", password="pw-123456")
    return api_token_create(username="alice")[1]


@pytest.fixture
def held_model(monkeypatch, scripted_provider) -> threading.Event:
    """A scripted main agent whose every model call blocks until the event is set."""
    scripted_provider([{"when": {"team": "main"}, "reply": {"content": "done"}}])
    release = threading.Event()
    real = scripted.scripted_reply

    def held(*args, **kwargs):
        release.wait(timeout=60)
        return real(*args, **kwargs)

    monkeypatch.setattr(scripted, "scripted_reply", held)
    yield release
    release.set()  # never leave a turn thread blocked behind a failed test


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_connections")
async def test_the_ack_arrives_while_the_turn_is_still_waiting_for_its_model(token, held_model):
    communicator = await connect(f"/ws/chat/?token={token}")
    await receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "hello"})
    ack = (await receive_until(communicator, "ack"))[-1]
    assert await Message.objects.filter(pk=ack["message_id"], content="hello").aexists()
    # The model has not answered: nothing but routing news may follow the ack yet.
    assert not [m for m in await drain(communicator) if m["type"] in ("response", "error")]
    held_model.set()
    seen = await receive_until(communicator, "response")
    assert seen[-1]["content"] == "done"
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_connections")
async def test_a_full_socket_gets_a_busy_error_and_the_message_is_not_stored(
    token, held_model, settings
):
    settings.OPENHIVE = {**settings.OPENHIVE, "CHAT_PENDING_PER_SOCKET": 2}
    communicator = await connect(f"/ws/chat/?token={token}")
    await receive_until(communicator, "topic_list")
    for text in ("one", "two"):
        await communicator.send_json_to({"type": "message", "content": text})
        await receive_until(communicator, "ack")
    await communicator.send_json_to({"type": "message", "content": "three"})
    error = (await receive_until(communicator, "error"))[-1]
    assert error["code"] == "busy"
    assert "wait for the answers" in error["message"]
    assert not await Message.objects.filter(content="three").aexists()
    # Once the answers are out, the socket takes messages again.
    held_model.set()
    await receive_until(communicator, "response", count=2)
    await communicator.send_json_to({"type": "message", "content": "three"})
    await receive_until(communicator, "ack")
    await receive_until(communicator, "response")
    await communicator.disconnect()


@pytest.fixture
async def turn_host():
    host = turnpool.ProcessTurns(preload_llm=False)  # these calls need no model
    yield host
    await host.stop()


async def test_the_turn_host_is_another_process_and_is_replaced_when_it_dies(turn_host):
    answer = await asyncio.wait_for(turn_host.call("ping", {}), 120)
    assert answer["pid"] == turn_host.pid != os.getpid()
    assert answer["thread"].startswith("chat-turn")  # its own threads run the calls
    with pytest.raises(RuntimeError, match="ValueError"):
        await asyncio.wait_for(turn_host.call("nonsense", {}), 30)
    turn_host.process.kill()
    await turn_host.process.wait()
    again = await asyncio.wait_for(turn_host.call("ping", {}), 120)
    assert again["pid"] == turn_host.pid != answer["pid"]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
async def test_a_stop_signal_ends_the_turn_host_quietly_and_is_not_reported_as_lost(
    turn_host, stop, caplog, capfd
):
    """Stopping the server signals its process group, the turn host too: it exits at once,
    with no KeyboardInterrupt trace, and the web process logs the stop, not a lost host."""
    await asyncio.wait_for(turn_host.call("ping", {}), 120)
    host = turn_host.process
    with caplog.at_level("INFO", logger="openhive.chat.turnpool"):
        os.kill(host.pid, stop)
        await asyncio.wait_for(host.wait(), 30)
        await asyncio.wait_for(turn_host.reader_task, 30)
    assert host.returncode == 128 + stop
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    stopped = f"the chat turn host stopped on a stop signal (exit status {128 + stop})"
    assert ("INFO", stopped) in said
    assert not [m for level, m in said if level == "WARNING"]
    assert "KeyboardInterrupt" not in capfd.readouterr().err


async def test_only_the_turn_hosts_main_thread_takes_stop_signals(turn_host):
    """The kernel hands a process's signal to any thread not blocking it; one taken by a turn
    thread left the main thread blocked on its socket, and the host outlived the stop."""
    from pathlib import Path

    await asyncio.wait_for(turn_host.call("ping", {}), 120)
    stops = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    blocked = {}
    for task in Path(f"/proc/{turn_host.pid}/task").iterdir():
        status = (task / "status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("SigBlk:"))
        blocked[int(task.name)] = int(line.split()[1], 16) & stops
    assert len(blocked) > 1  # turn threads (and any a library started) besides the main one
    main = blocked.pop(turn_host.pid)
    assert main == 0
    assert set(blocked.values()) == {stops}


async def test_a_turn_host_that_dies_otherwise_is_reported_as_lost(turn_host, caplog):
    await asyncio.wait_for(turn_host.call("ping", {}), 120)
    with caplog.at_level("INFO", logger="openhive.chat.turnpool"):
        turn_host.process.kill()
        await asyncio.wait_for(turn_host.reader_task, 30)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        "lost contact with the chat turn host (exit status -9); a new one starts on demand"
    ]


async def test_calls_running_when_the_host_dies_fail_instead_of_hanging():
    host = turnpool.ProcessTurns()
    future = asyncio.get_running_loop().create_future()
    host.pending[1] = (future, None)
    host._host_gone()
    with pytest.raises(turnpool.TurnHostGone):
        await future
    assert host.pending == {}


async def test_turns_wait_for_the_admissions_in_progress_and_no_longer_than_the_bound(
    monkeypatch,
):
    """A burst's acks go out before the turns it started: a turn waits while admissions are
    being written, starts at once when none are, and never waits past SETTLE_SECONDS. A turn
    cancelled while it waits (its socket closed) leaves the others waiting as before."""
    from openhive.chat import admit

    release = threading.Event()

    def written(batch: list) -> list:  # on the admit thread
        release.wait(timeout=10)  # the write, until the test lets it finish
        return [None] * len(batch)

    monkeypatch.setattr(admit, "chat_receive_many", written)
    queue = admit.AdmitQueue()
    await asyncio.wait_for(queue.settled(), 0.1)  # idle: no wait at all

    being_written = asyncio.ensure_future(queue.admit(object()))
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(queue.settled())
    gone = asyncio.ensure_future(queue.settled())
    await asyncio.sleep(0.02)
    assert not waiter.done() and not gone.done()
    gone.cancel()
    await asyncio.sleep(0)
    assert not waiter.done()
    release.set()
    await asyncio.wait_for(waiter, 1)
    await being_written
    assert gone.cancelled()

    monkeypatch.setattr(admit, "SETTLE_SECONDS", 0.01)
    release.clear()
    stuck = asyncio.ensure_future(queue.admit(object()))
    await asyncio.sleep(0)
    await asyncio.wait_for(queue.settled(), 1)  # the bound, not the admissions, ends it
    assert not stuck.done()
    release.set()
    await stuck
    assert queue.waiters == [] and queue.wake is None  # nothing left behind


async def test_the_admit_thread_writes_a_bursts_batches_back_to_back_while_the_loop_is_busy(
    monkeypatch,
):
    """The admit thread takes the next batch itself once one is written: a busy event loop
    (sending the last batch's acks) does not hold the next write back. Each batch's callers
    hear as soon as it is written, in arrival order."""
    import time

    from openhive.chat import admit

    starts: list[float] = []

    def written(batch: list) -> list:  # on the admit thread
        starts.append(time.monotonic())
        time.sleep(0.01)
        return list(batch)

    monkeypatch.setattr(admit, "chat_receive_many", written)
    monkeypatch.setattr(admit, "ADMIT_BATCH", 2)
    queue = admit.AdmitQueue()
    acks = [asyncio.ensure_future(queue.admit(number)) for number in range(6)]
    while not starts:  # all six queued, the first write begun
        await asyncio.sleep(0.001)
    time.sleep(0.2)  # the event loop busy with other work meanwhile
    busy_until = time.monotonic()
    assert await asyncio.gather(*acks) == list(range(6))
    assert len(starts) == 3 and starts[-1] < busy_until


async def test_an_admission_is_written_while_the_event_loop_is_still_busy(monkeypatch):
    """An admission goes to the admit thread straight away, not through a task of the event
    loop, which in a burst gets to it only after every frame read before it."""
    from openhive.chat import admit

    started = threading.Event()

    def written(batch: list) -> list:  # on the admit thread
        started.set()
        return [admission for (admission,) in zip(batch, strict=True)]

    monkeypatch.setattr(admit, "chat_receive_many", written)
    queue = admit.AdmitQueue()
    ack = asyncio.ensure_future(queue.admit("hello"))
    await asyncio.sleep(0)  # the admission is queued; the loop then stays busy below
    assert started.wait(timeout=5)
    assert await asyncio.wait_for(ack, 5) == "hello"


async def test_admissions_arriving_as_the_admit_thread_finishes_are_all_written(monkeypatch):
    """The thread stops writing only when it finds nothing waiting, and an admission that
    finds it stopped starts it again: none is left unwritten however the two interleave, and
    the queue ends idle."""
    import random

    from openhive.chat import admit

    rng = random.Random(7)

    def written(batch: list) -> list:  # on the admit thread
        if rng.random() < 0.5:
            threading.Event().wait(rng.random() / 1000)
        return list(batch)

    monkeypatch.setattr(admit, "chat_receive_many", written)
    monkeypatch.setattr(admit, "QUIET_SECONDS", 0.0)
    queue = admit.AdmitQueue()
    acks = []
    for number in range(300):
        acks.append(asyncio.ensure_future(queue.admit(number)))
        if number % 3 == 0:
            await asyncio.sleep(rng.random() / 2000)
    assert await asyncio.wait_for(asyncio.gather(*acks), 10) == list(range(300))
    await asyncio.sleep(0.01)
    assert queue.idle and not queue.writing and not queue.waiting


async def test_a_bursts_turns_wait_for_admissions_to_pause_and_a_lone_messages_do_not(
    monkeypatch,
):
    """Where a batch is written quickly, the queue goes idle between a burst's arrivals: the
    burst's turns wait until admissions pause for QUIET_SECONDS (at most QUIET_WAIT_SECONDS),
    so the later acks are not slowed by the first turns. A message arriving within
    QUIET_SECONDS of the last one starts a burst, even if that one was already written."""
    import time

    from openhive.chat import admit

    def written(batch: list) -> list:  # on the admit thread
        time.sleep(0.005)  # the write
        return [None] * len(batch)

    monkeypatch.setattr(admit, "chat_receive_many", written)
    monkeypatch.setattr(admit, "QUIET_SECONDS", 0.1)
    queue = admit.AdmitQueue()

    await queue.admit(object())  # a lone message: its turn goes at once
    await asyncio.wait_for(queue.settled(), 0.05)

    await asyncio.gather(*(queue.admit(object()) for _ in range(3)))  # a burst, all acked
    started = time.monotonic()
    await queue.settled()
    assert time.monotonic() - started >= 0.09  # waited for the pause after the burst
    await asyncio.wait_for(queue.settled(), 0.05)  # and once calm, no more

    await asyncio.sleep(0.15)  # admissions paused
    await queue.admit(object())  # lone again: its turn goes at once
    await asyncio.wait_for(queue.settled(), 0.05)
    await queue.admit(object())  # the next, soon after, though the first was written: a burst
    started = time.monotonic()
    await queue.settled()
    assert time.monotonic() - started >= 0.09

    monkeypatch.setattr(admit, "QUIET_WAIT_SECONDS", 0.05)
    await asyncio.gather(*(queue.admit(object()) for _ in range(3)))
    started = time.monotonic()
    await queue.settled()  # the bound ends a wait that admissions could keep going
    assert time.monotonic() - started < 0.09


@pytest.mark.usefixtures("collections_unpaused")
async def test_a_burst_is_acked_without_automatic_collections_which_resume_once_it_is_calm(
    monkeypatch,
):
    """A young collection every 700 new objects paused a 500-message burst's acks 13 times:
    collection is off while a burst is written and acked, on again once admissions pause, and
    never off for a lone message or for longer than COLLECTION_PAUSE_SECONDS."""
    import gc
    import time

    from openhive.chat import admit

    on_during_writes: list[bool] = []

    def written(batch: list) -> list:  # on the admit thread
        on_during_writes.append(gc.isenabled())
        time.sleep(0.005)
        return [None] * len(batch)

    monkeypatch.setattr(admit, "chat_receive_many", written)
    monkeypatch.setattr(admit, "QUIET_SECONDS", 0.05)
    queue = admit.AdmitQueue()

    await queue.admit(object())  # a lone message
    assert on_during_writes == [True] and queue.collection_pause is None

    await asyncio.sleep(0.1)
    await asyncio.gather(*(queue.admit(object()) for _ in range(3)))  # a burst
    assert on_during_writes[-1] is False  # its batch was written with collection off
    assert gc.isenabled() is False  # and it stays off until admissions pause
    await queue.settled()
    assert gc.isenabled() is True and queue.collection_pause is None

    monkeypatch.setattr(admit, "COLLECTION_PAUSE_SECONDS", 0.05)
    stream = [asyncio.ensure_future(queue.admit(object()))]
    deadline = asyncio.get_running_loop().time() + 5
    while asyncio.get_running_loop().time() < deadline:  # never pausing for QUIET_SECONDS
        await asyncio.sleep(0.01)
        stream.append(asyncio.ensure_future(queue.admit(object())))
        if len(stream) > 3 and gc.isenabled():
            break
    pause = queue.collection_pause
    assert gc.isenabled() is True and pause is not None and pause.ended  # it ran out
    assert queue.calm is False
    for _ in range(3):  # and the same stream does not take another
        await asyncio.sleep(0.01)
        stream.append(asyncio.ensure_future(queue.admit(object())))
        assert gc.isenabled() is True and queue.collection_pause is pause
    await asyncio.gather(*stream)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_connections")
async def test_a_chat_frame_does_not_queue_through_the_shared_sync_thread(
    token, scripted_provider, monkeypatch
):
    """Channels closes old connections on its one sync thread before every frame; the chat
    consumer's database work runs on its own threads, so its frames skip that round trip."""
    import channels.consumer

    scripted_provider([{"when": {"team": "main"}, "reply": {"content": "done"}}])

    async def refuse() -> None:
        raise AssertionError("a chat frame waited for the shared sync thread")

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", refuse)
    communicator = await connect(f"/ws/chat/?token={token}")
    await receive_until(communicator, "topic_list")
    await communicator.send_json_to({"type": "message", "content": "hello"})
    await receive_until(communicator, "ack")
    assert (await receive_until(communicator, "response"))[-1]["content"] == "done"
    await communicator.disconnect()

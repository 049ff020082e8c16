"""Admitting inbound chat messages: the trust gate, then the store, before the `ack`.

A burst of messages (500 sockets sending at once) used to be 500 write transactions, one after
another on SQLite, and the last ack waited for all of them. Admissions that arrive while one
is being written are written together in the next transaction: a lone message is written at
once, a burst in a few transactions of up to ADMIT_BATCH messages each. The writes run on the
admit thread (dbpool.start_on_admit_thread), which nothing else uses."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import DatabaseError, OperationalError, connection, transaction

from openhive.core.db import (
    RESET_ERRORS,
    keep_connection_if_sound,
    reconnecting,
    statements_in_one_query,
)
from openhive.core.errors import DomainError, NotFound
from openhive.core.heap import CollectionPause, pause_collections
from trust.gate import Decision, Sender
from trust.services import (
    trust_audit_record_many,
    trust_audit_statement,
    trust_gate_decide_many,
)

from .dbpool import running_on_admit_thread, start_on_admit_thread
from .models import Message, Topic
from .services import message_admit_many

logger = logging.getLogger(__name__)

ADMIT_BATCH = 200
# How long an admission waits for SQLite's write lock (as long as any other write would).
LOCK_PATIENCE_SECONDS = 30.0
LOCK_POLL_SECONDS = 0.001
# The longest a turn waits for the admissions in progress to be acked (AdmitQueue.settled).
SETTLE_SECONDS = 2.0
# After a burst (admissions written together), how long admissions must pause before the
# burst's turns start, and the longest a turn waits for that pause (AdmitQueue.settled).
QUIET_SECONDS = 0.05
QUIET_WAIT_SECONDS = 0.5
# The longest a burst keeps the garbage collector paused (AdmitQueue._unsettled).
COLLECTION_PAUSE_SECONDS = 1.0


class Unavailable(DomainError):
    """The message was admitted but could not be stored (database trouble)."""

    code = "unavailable"


@dataclass
class Inbound:
    decision: Decision
    message: Message | None
    topic_id: int | None = None  # the topic the client named, if any
    new_topic: bool = False  # the client asked for a new topic


@dataclass
class Admission:
    sender: Sender
    content: str
    topic_id: int | None = None
    new_topic: bool = False


def chat_receive(
    *, sender: Sender, content: str, topic_id: int | None, new_topic: bool = False
) -> Inbound:
    """The trust gate first, before anything else looks at the message. A refused message is
    kept (stamped, with no topic) for the operator, and goes nowhere else: no trigger, no
    topic, no model. If the database fails, nothing is admitted."""
    (result,) = chat_receive_many([Admission(sender, content, topic_id, new_topic)])
    if isinstance(result, DomainError):
        raise result
    return result


def chat_receive_many(admissions: list[Admission]) -> list[Inbound | DomainError]:
    """`chat_receive` for many messages in one transaction (one SQLite write lock, a handful
    of statements whatever their number). Each gets its Inbound, or the error that refused it
    (a topic it may not name: then nothing of it is stored)."""
    try:
        return _store(admissions)
    except DatabaseError as exc:
        logger.exception("could not store inbound chat messages")
        error = Unavailable("the message could not be stored; try again shortly")
        error.__cause__ = exc
        return [error] * len(admissions)


# The admit thread's connection is not pinged before each batch (dbpool): one cut meanwhile (a
# restart, a failover) fails the batch's first statement, and this writes it again on a new
# connection. What still fails becomes Unavailable, so dbpool's own retry never sees it.
@reconnecting
def _store(admissions: list[Admission]) -> list[Inbound | DomainError]:
    if statements_in_one_query():
        try:
            return _admit_many(admissions, together=True)
        except RESET_ERRORS:
            raise
        except DatabaseError:
            if connection.in_atomic_block:  # the caller's transaction is spoilt
                raise
            # Written apart below, where the audit rows' failure alone loses no message.
            logger.warning("admitting chat messages in one query failed", exc_info=True)
    with _eager_for_the_write_lock():
        deadline = time.monotonic() + LOCK_PATIENCE_SECONDS
        while True:
            try:
                with transaction.atomic(durable=True):
                    return _admit_many(admissions, together=False)
            except OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(LOCK_POLL_SECONDS)


@contextlib.contextmanager
def _eager_for_the_write_lock() -> Iterator[None]:
    """SQLite has one writer. Its own wait for the lock sleeps up to 100 ms between tries, and
    a turn host with many threads writing wins the lock over and over: acks waited a second.
    Admissions ask again every millisecond instead (nothing is written until they hold it)."""
    if connection.vendor != "sqlite":
        yield
        return
    if running_on_admit_thread():
        # Its connection writes nothing but admissions: set once, not around every batch.
        # Each statement hands the GIL back and forth with the event loop, and in a burst
        # each waited up to the 5 ms switch interval for it (3 of a batch's ~10 statements).
        connection.ensure_connection()
        if getattr(connection, "eager_raw_connection", None) is not connection.connection:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA busy_timeout = 1")
            connection.eager_raw_connection = connection.connection
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        (previous,) = cursor.fetchone()
        cursor.execute("PRAGMA busy_timeout = 1")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {int(previous)}")


def _admit_many(admissions: list[Admission], *, together: bool) -> list[Inbound | DomainError]:
    """`together`: the audit rows and the messages go in one query, which PostgreSQL runs as
    one transaction: one round trip for a batch, where BEGIN, a savepoint around the audit
    rows, its release, each INSERT and COMMIT took six (a lone message's admission on loopback:
    1.7-1.8 ms before, 0.8 ms after; benchmarks/chat_admission.py)."""
    decisions = trust_gate_decide_many([a.sender for a in admissions])
    pairs = list(zip(admissions, decisions, strict=True))
    named = {a.topic_id for a, d in pairs if d.allowed and a.topic_id}
    open_topics = set(
        Topic.objects.filter(pk__in=named)
        .exclude(state=Topic.State.CLOSED)
        .values_list("pk", "channel_id")
        if named
        else ()
    )
    results: list[Inbound | DomainError | None] = []
    kept: list[tuple[Admission, Decision]] = []
    for admission, decision in pairs:
        topic_id = admission.topic_id
        # Ids are looked up as ids, only within the sender's own channel.
        named_elsewhere = (topic_id, admission.sender.channel_id) not in open_topics
        if decision.allowed and topic_id is not None and named_elsewhere:
            results.append(
                NotFound(
                    f"topic {topic_id} does not exist in this conversation", code="unknown_topic"
                )
            )
            continue
        results.append(None)
        kept.append((admission, decision))
    audited = [(a.sender, d) for a, d in kept]
    if not together:
        trust_audit_record_many(audited)
    messages = iter(
        message_admit_many(
            [
                {
                    "channel_id": a.sender.channel_id,
                    "sender_id": a.sender.sender_id,
                    "sender_asserted": a.sender.asserted,
                    "content": a.content,
                    "trust_decision": d.label,
                    "trust_reason": d.reason,
                }
                for a, d in kept
            ],
            after=trust_audit_statement(audited) if together and audited else None,
        )
    )
    stored = iter(kept)
    out: list[Inbound | DomainError] = []
    for result in results:
        if result is not None:
            out.append(result)
            continue
        admission, decision = next(stored)
        out.append(
            Inbound(
                decision=decision,
                message=next(messages),
                topic_id=admission.topic_id,
                new_topic=admission.new_topic,
            )
        )
    return out


@dataclass(slots=True)
class _Waiter:
    """A turn waiting in `AdmitQueue.settled`: first for the queue to be idle (until
    `idle_by`), then for it to be calm (until `calm_by`, set when that wait begins)."""

    future: asyncio.Future
    idle_by: float
    calm_by: float | None = None


class AdmitQueue:
    """The admissions of one event loop's sockets, written in arrival order, together when
    they arrive together."""

    def __init__(self) -> None:
        self.waiting: collections.deque[tuple[Admission, asyncio.Future]] = collections.deque()
        # `waiting` and `writing` change together under the lock: the event loop adds an
        # admission and starts the admit thread if it is not writing; the admit thread stops
        # writing only when it finds nothing waiting. No admission is left unwritten between.
        self.lock = threading.Lock()
        self.writing = False  # the admit thread is writing (or about to)
        self.idle = True  # no admission waiting or being written (as the event loop knows)
        # False from a burst's last write until admissions have paused for QUIET_SECONDS.
        self.calm = True
        self.quiet: asyncio.TimerHandle | None = None
        self.waiters: list[_Waiter] = []
        self.wake: asyncio.TimerHandle | None = None  # at the waiters' next bound
        self.wake_at = 0.0
        self.arrived = float("-inf")  # the last admission's arrival (loop time)
        self.collection_pause: CollectionPause | None = None

    async def settled(self) -> None:
        """Returns once no admission is waiting or being written, or after SETTLE_SECONDS.

        A burst's turns (routing, the turn host's traffic, their events, topic lists and
        answers) run on the same event loop, and hold the same GIL, as the admissions: started
        at once, the first acked messages' turns made the rest of the burst wait longer for
        their acks. Turns wait here first, so a burst's acks go out before the turns they
        start; the bound keeps a steady stream of admissions from holding turns back long.
        After a burst (admissions written together, or arriving within QUIET_SECONDS of each
        other) turns also wait for admissions to pause
        for QUIET_SECONDS, at most QUIET_WAIT_SECONDS: where a batch is written quickly
        (PostgreSQL), the queue went idle between the burst's arrivals, and the first turns
        took CPU from the later acks (ack p99 ~200 -> ~150 ms at 500 sockets). A lone
        message's turn does not wait.

        The queue releases its waiters itself, on its own changes and one timer for their
        bounds: a burst's 500 turns wait here at once, and a timeout (a timer, a task) per
        waiter was a tenth of the event loop's work in the burst."""
        if self.idle and self.calm:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        waiter = _Waiter(
            loop.create_future(),
            idle_by=now + SETTLE_SECONDS,
            calm_by=now + QUIET_WAIT_SECONDS if self.idle else None,
        )
        self.waiters.append(waiter)
        self._wake_by(waiter.calm_by or waiter.idle_by)
        await waiter.future  # cancelling the turn cancels only its own future

    def _wake_by(self, moment: float) -> None:
        if self.wake is not None and self.wake_at <= moment:
            return
        if self.wake is not None:
            self.wake.cancel()
        self.wake, self.wake_at = asyncio.get_running_loop().call_at(moment, self._release), moment

    def _release(self) -> None:
        """Release the waiters whose wait is over; the timer goes to the next bound."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        kept: list[_Waiter] = []
        for waiter in self.waiters:
            if waiter.future.done():
                continue
            if waiter.calm_by is None and (self.idle or now >= waiter.idle_by):
                waiter.calm_by = now + QUIET_WAIT_SECONDS
            if waiter.calm_by is not None and (self.calm or now >= waiter.calm_by):
                waiter.future.set_result(None)
                continue
            kept.append(waiter)
        self.waiters = kept
        if self.wake is not None:
            self.wake.cancel()
            self.wake = None
        if kept:
            self._wake_by(min(w.idle_by if w.calm_by is None else w.calm_by for w in kept))

    async def admit(self, admission: Admission) -> Inbound:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self.lock:
            self.waiting.append((admission, future))
            start, self.writing = not self.writing, True
        now = loop.time()
        # Arriving while others are written, or soon after the last arrival, is a burst. Where
        # a lone message's write ended before the next one arrived, the first messages of a
        # burst each counted as lone, and their turns took CPU from the rest of the acks.
        if not self.idle or now - self.arrived < QUIET_SECONDS:
            self._unsettled()
        self.arrived = now
        if start:
            if self.quiet is not None:  # admissions go on: the burst is not over
                self.quiet.cancel()
                self.quiet = None
            self.idle = False
            # Handed to the admit thread at once. Started from a task of the event loop, the
            # write began only once the loop had read every frame that came before that
            # task's step: in a 500-message burst from 4 client processes the first batch
            # began 11-17 ms after the first frame, and the thread sat idle up to 26 ms
            # between batches while the loop read the frames that filled the next one.
            start_on_admit_thread(_write_waiting, self, loop)
        return await future

    def take_batch(self) -> list[tuple[Admission, asyncio.Future]]:
        """Up to ADMIT_BATCH of the waiting admissions, oldest first (on the admit thread);
        none means the thread stops writing, and the next admission starts it again."""
        batch = []
        with self.lock:
            while self.waiting and len(batch) < ADMIT_BATCH:
                batch.append(self.waiting.popleft())
            if not batch:
                self.writing = False
        return batch

    def stop_writing(self) -> None:
        with self.lock:
            self.writing = False

    def written(self, largest: int) -> None:
        """On the event loop, once the admit thread has found nothing left to write: the
        queue is idle, unless an admission came meanwhile and started it again."""
        if largest > 1:
            self._unsettled()
        with self.lock:
            if self.writing:
                return  # that write's own end settles the queue
        self.idle = True
        if not self.calm:  # calm once admissions have paused
            self.quiet = asyncio.get_running_loop().call_later(QUIET_SECONDS, self._calmed)
        if self.waiters:
            self._release()

    def _unsettled(self) -> None:
        """A burst: its acks should not wait for the garbage collector. Young collections
        every few hundred objects (each walking the burst's live frames, futures and
        messages) and the middle one after ten of them took 17-25 ms of a 500-message
        burst's first round of acks. Paused until the queue is calm again, at most
        COLLECTION_PAUSE_SECONDS (once per burst: a stream that never pauses is collected as
        usual after that). What the burst left is collected at the next allocation after,
        while its turns start."""
        self.calm = False
        if self.collection_pause is None:
            self.collection_pause = pause_collections(COLLECTION_PAUSE_SECONDS)

    def _calmed(self) -> None:
        self.quiet = None
        self.calm = True
        if self.collection_pause is not None:
            self.collection_pause.end()
            self.collection_pause = None
        if self.waiters:
            self._release()


def _write_waiting(queue: AdmitQueue, loop: asyncio.AbstractEventLoop) -> None:
    """On the admit thread: write the queue's admissions batch after batch until none is
    waiting, and tell each batch's callers as soon as it is committed; then tell the queue.
    The thread goes on to the next batch itself: when the event loop started each one, the
    next write began only once the busy loop got round to it, after the batch's acks (gaps of
    2-10 ms between the batches of a 500-message burst, of ~55 ms to its last ack)."""
    largest = 0
    try:
        while batch := queue.take_batch():
            largest = max(largest, len(batch))
            try:
                keep_connection_if_sound()  # as before each unit of work on a pool thread
                results: list = chat_receive_many([a for a, _ in batch])
            except Exception as exc:  # a fault of this code: every caller of the batch hears it
                logger.exception("admitting chat messages failed")
                results = [exc] * len(batch)
            _on_loop(loop, _tell, batch, results)
    except BaseException:
        queue.stop_writing()  # the next admission starts the thread again
        raise
    finally:
        _on_loop(loop, queue.written, largest)


def _on_loop(loop: asyncio.AbstractEventLoop, callback, *args: object) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(callback, *args)


def _tell(batch: list[tuple[Admission, asyncio.Future]], results: list) -> None:
    for (_, future), result in zip(batch, results, strict=True):
        if future.done():  # the socket went away; the message is stored anyway
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AdmitQueue] = (
    weakref.WeakKeyDictionary()
)


def admit_queue() -> AdmitQueue:
    loop = asyncio.get_running_loop()
    queue = _queues.get(loop)
    if queue is None:
        queue = _queues[loop] = AdmitQueue()
    return queue

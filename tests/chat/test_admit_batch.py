"""Admitting many inbound messages in one transaction: each keeps its own gate decision and
topic check, in a fixed number of statements; over the socket, a burst is acked in order."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from openhive.chat.admit import Admission, Inbound, chat_receive_many
from openhive.chat.models import Message, Topic
from openhive.core.errors import NotFound
from trust.gate import Sender
from trust.models import TrustAuditLog
from trust.services import api_token_create, sender_trust_set

from .conftest import connect, receive_until


@pytest.fixture
def policy(trust_policy):
    trust_policy(
        {
            "default_policy": "deny",
            "channels": {"ws": {"policy": "allow", "sender_denylist": ["eve"]}},
        }
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("policy")
def test_a_batch_admits_each_message_by_its_own_decision_and_topic(
    django_assert_max_num_queries,
):
    mine = Topic.objects.create(channel_id="ws:user:1", name="mine")
    theirs = Topic.objects.create(channel_id="ws:user:2", name="theirs")
    closed = Topic.objects.create(channel_id="ws:user:1", name="old", state=Topic.State.CLOSED)
    alice, eve = Sender("ws:user:1", "alice"), Sender("ws:user:3", "eve")
    batch = [
        Admission(alice, "hello"),
        Admission(eve, "let me in"),
        Admission(alice, "in my topic", topic_id=mine.pk),
        Admission(alice, "in theirs", topic_id=theirs.pk),
        Admission(alice, "in a closed one", topic_id=closed.pk),
        Admission(alice, "new please", new_topic=True),
    ]
    # Statements do not grow with the batch: grants, topics, audit rows, messages, the
    # transaction and the audit's savepoint, the scrubber's secret list (cached later), and on
    # SQLite three PRAGMAs for the write-lock wait.
    with django_assert_max_num_queries(12):
        results = chat_receive_many(batch)

    hello, refused, in_mine, in_theirs, in_closed, new = results
    assert hello.decision.allowed and hello.message.content == "hello"
    assert refused.decision.silent and refused.message.trust_decision == refused.decision.label
    assert in_mine.topic_id == mine.pk and in_mine.message.topic is None  # routing files it
    for refused_topic in (in_theirs, in_closed):
        assert isinstance(refused_topic, NotFound) and refused_topic.code == "unknown_topic"
    assert new.new_topic
    stored = list(Message.objects.order_by("pk").values_list("content", flat=True))
    assert stored == ["hello", "let me in", "in my topic", "new please"]
    # Nothing of a refused topic is stored, not even its audit row.
    assert TrustAuditLog.objects.count() == 4


@pytest.mark.django_db
@pytest.mark.usefixtures("policy")
def test_each_admitted_message_is_the_row_stored_under_its_id_and_audited():
    """The batch's rows go in by one statement that bypasses bulk_create: each returned
    message carries the id of its own row, and the audit rows hold what the gate decided."""
    Message.objects.create(channel_id="ws:user:9", role=Message.Role.USER, content="before")
    senders = [Sender(f"ws:user:{n}", f"user{n}") for n in range(5)] + [Sender("ws:x", "eve")]
    results = chat_receive_many([Admission(s, f"text {s.sender_id}") for s in senders])
    for sender, result in zip(senders, results, strict=True):
        stored = Message.objects.get(pk=result.message.pk)
        assert (stored.sender_id, stored.content) == (sender.sender_id, f"text {sender.sender_id}")
        assert stored.trust_decision == result.decision.label and stored.created_at is not None
        assert stored.created_at == result.message.created_at and stored.topic_id is None
    audit = list(TrustAuditLog.objects.order_by("id").values_list("sender_id", "decision"))
    assert audit == [(r.message.sender_id, r.decision.label) for r in results]
    assert TrustAuditLog.objects.filter(created_at__isnull=True).count() == 0


@pytest.mark.django_db
@pytest.mark.usefixtures("policy")
def test_stored_grants_decide_in_a_batch_as_they_do_alone():
    for sender_id, channel_id, level in (
        ("eve", "", "trusted"),  # the denylist still wins
        ("bob", "ws:user:1", "denied"),  # this channel only
        ("bob", "", "trusted"),
        ("carol", "", "trusted"),
    ):
        sender_trust_set(
            channel_type="ws",
            channel_id=channel_id,
            sender_id=sender_id,
            trust_level=level,
            granted_by="test",
        )
    senders = [
        Sender("ws:user:3", "eve"),
        Sender("ws:user:1", "bob"),
        Sender("ws:user:2", "bob"),
        Sender("ws:user:4", "carol"),
    ]
    results = chat_receive_many([Admission(s, "hi") for s in senders])
    assert all(isinstance(r, Inbound) for r in results)
    reasons = [r.decision.reason for r in results]
    assert reasons == ["sender_denylist", "db_denied", "db_trusted", "db_trusted"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_db_connections", "fast_hashing")
async def test_a_burst_from_one_socket_is_acked_and_stored_in_order(
    django_user_model, scripted_provider
):
    scripted_provider([{"when": {"team": "main"}, "reply": {"content": "ok"}}])
    await sync_to_async(django_user_model.objects.create_user)(username="alice", password="pw")
    token = (await sync_to_async(api_token_create)(username="alice"))[1]
    communicator = await connect(f"/ws/chat/?token={token}")
    await receive_until(communicator, "topic_list")
    for i in range(10):
        await communicator.send_json_to({"type": "message", "content": f"m{i}"})
    seen = await receive_until(communicator, "ack", count=10)
    ids = [m["message_id"] for m in seen if m["type"] == "ack"]
    assert ids == sorted(ids)
    contents = [
        c
        async for c in Message.objects.filter(pk__in=ids)
        .order_by("pk")
        .values_list("content", flat=True)
    ]
    assert contents == [f"m{i}" for i in range(10)]
    # Every message gets its answer (this test is about admission: any answer counts); a
    # fast turn may answer the first messages before the last ones are acked.
    answers = sum(m["type"] in ("response", "error") for m in seen)
    while answers < 10:
        message = await communicator.receive_json_from(timeout=120)
        answers += message["type"] in ("response", "error")
    await communicator.disconnect()


needs_one_query = pytest.mark.skipif(
    "not __import__('openhive.core.db', fromlist=['x']).statements_in_one_query()",
    reason="PostgreSQL with client-side binding takes several statements in one query",
)


@needs_one_query
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("policy")
def test_on_postgresql_a_batch_is_stored_and_audited_in_one_query(django_assert_num_queries):
    senders = [Sender(f"ws:user:{n}", f"user{n}") for n in range(50)]
    chat_receive_many([Admission(Sender("ws:user:0", "first"), "loads the scrubber's secrets")])
    Message.objects.all().delete()
    TrustAuditLog.objects.all().delete()
    # The stored grants (one read), then the audit rows and the messages together.
    with django_assert_num_queries(2) as captured:
        results = chat_receive_many([Admission(s, f"hi {s.sender_id}") for s in senders])
    assert "trust_trustauditlog" in captured[-1]["sql"] and "chat_message" in captured[-1]["sql"]
    assert [r.message.content for r in results] == [f"hi user{n}" for n in range(50)]
    assert Message.objects.count() == 50 and TrustAuditLog.objects.count() == 50


@needs_one_query
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("policy")
def test_audit_rows_that_cannot_be_written_lose_no_message(monkeypatch, caplog):
    """The one query fails as a whole; the batch is then written as before, the audit rows in
    a savepoint of their own whose failure is logged, and every message is kept."""
    from openhive.chat import admit
    from trust import services as trust_services

    def broken(entries):
        return "INSERT INTO trust_no_such_table VALUES (1)", []

    monkeypatch.setattr(admit, "trust_audit_statement", broken)
    monkeypatch.setattr(trust_services, "trust_audit_statement", broken)
    results = chat_receive_many([Admission(Sender("ws:user:1", "alice"), "still here")])
    assert isinstance(results[0], Inbound) and results[0].message.pk is not None
    assert list(Message.objects.values_list("content", flat=True)) == ["still here"]
    assert TrustAuditLog.objects.count() == 0
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "in one query failed" in logged and "could not write the audit rows" in logged


@needs_one_query
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("policy")
def test_an_admission_thread_whose_connection_was_cut_reconnects_and_stores_the_message():
    """The admit thread does not ping its connection before each batch: one cut while it idled
    (a failover, a server restart) costs the next batch a reconnect, not the message."""
    from asgiref.sync import async_to_sync
    from django.db import connections

    from openhive.chat import dbpool

    admit_batch = async_to_sync(dbpool.on_admit_thread(chat_receive_many))
    try:
        first = admit_batch([Admission(Sender("ws:user:1", "alice"), "one")])
        assert isinstance(first[0], Inbound)
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            assert cursor.fetchone()[0] >= 1
        second = admit_batch([Admission(Sender("ws:user:1", "alice"), "two")])
        assert isinstance(second[0], Inbound), second
        stored = Message.objects.order_by("pk").values_list("content", flat=True)
        assert list(stored) == ["one", "two"]
    finally:
        dbpool.close_db_connections()


@needs_one_query
@pytest.mark.django_db(transaction=True)
def test_a_chat_database_thread_whose_connection_was_cut_reconnects_for_its_next_read():
    """The socket's reads (topic lists, outbox, interceptions) are not preceded by a ping
    either: a cut connection costs the next call a reconnect, not an error."""
    from asgiref.sync import async_to_sync
    from django.db import connections

    from openhive.chat import dbpool, selectors

    Topic.objects.create(channel_id="ws:user:1", name="kept")
    topics = async_to_sync(dbpool.db(selectors.topics_for_channel))
    try:
        for _ in range(8):  # every pool thread opens its connection
            assert [t.name for t in topics(channel_id="ws:user:1")] == ["kept"]
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        for _ in range(8):
            assert [t.name for t in topics(channel_id="ws:user:1")] == ["kept"]
    finally:
        dbpool.close_db_connections()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("policy", "close_db_connections")
async def test_the_admit_thread_sets_its_eager_lock_wait_once_and_others_keep_their_own():
    """On SQLite an admission asks for the write lock every millisecond. The admit thread's
    connection writes nothing else, so it is set once, not around every batch (each statement
    of a batch waited for the GIL in a burst); any other caller's wait is restored after."""
    from django.db import connection

    from openhive.chat.dbpool import on_admit_thread

    if connection.vendor != "sqlite":
        pytest.skip("the write-lock wait is SQLite's")

    def admit_once() -> tuple[list[str], int]:
        sent: list[str] = []

        def record(execute, sql, params, many, context):
            sent.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(record):
            (inbound,) = chat_receive_many([Admission(Sender("ws:user:1", "alice"), "hi")])
        assert isinstance(inbound, Inbound)
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout")
            (patience,) = cursor.fetchone()
        return [s for s in sent if "busy_timeout" in s], patience

    first, patience = await on_admit_thread(admit_once)()
    assert first == ["PRAGMA busy_timeout = 1"] and patience == 1
    again, patience = await on_admit_thread(admit_once)()
    assert again == [] and patience == 1
    elsewhere, patience = await sync_to_async(admit_once, thread_sensitive=False)()
    assert len(elsewhere) == 3 and patience > 1  # read, set to 1, set back
    assert await Message.objects.filter(content="hi").acount() == 3

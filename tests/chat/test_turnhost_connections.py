"""The turn host's threads keep their database connection from one call to the next (a new
one per call cost a PostgreSQL server process twice a chat message), and drop one that a call
left unusable."""

from __future__ import annotations

import pickle
import socket
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from django.db import connection, connections

from openhive.chat import turn
from openhive.chat.turnhost import Host
from openhive.chat.turnpool import HEADER


def _replies(sock: socket.socket, count: int) -> list[tuple]:
    stream = sock.makefile("rb")
    out = []
    for _ in range(count):
        (size,) = HEADER.unpack(stream.read(HEADER.size))
        out.append(pickle.loads(stream.read(size)))
    return out


def _inbound(message: str) -> SimpleNamespace:
    return SimpleNamespace(
        message=message, decision=SimpleNamespace(allowed=True), topic_id=None, new_topic=False
    )


@pytest.mark.django_db(transaction=True)
def test_a_turn_host_thread_keeps_its_connection_and_drops_one_left_in_a_transaction(
    monkeypatch,
):
    used = []

    def chat_route(*, message: str, **_: object) -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        used.append(connection.connection)
        if message == "leaves a transaction open":
            connection.set_autocommit(False)
        return f"routed {message}"

    # The real route_inbound runs: it must not close the connection itself.
    monkeypatch.setattr(turn, "chat_route", chat_route)
    ours, theirs = socket.socketpair()
    host = Host(ours, threads=1)

    def three_calls() -> object:
        try:
            host.handle(1, "route", {"inbound": _inbound("first")})
            host.handle(2, "route", {"inbound": _inbound("leaves a transaction open")})
            left = connection.connection
            host.handle(3, "route", {"inbound": _inbound("third")})
            return left
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as thread:
        left = thread.submit(three_calls).result(timeout=60)
    replies = _replies(theirs, 3)
    ours.close()
    theirs.close()
    assert [value for _id, _kind, value in replies] == [
        "routed first",
        "routed leaves a transaction open",
        "routed third",
    ]
    assert used[0] is used[1]  # the second call ran on the first call's connection
    assert left is None  # left outside autocommit: closed, not handed to the next call
    assert used[2] is not None and used[2] is not used[1]

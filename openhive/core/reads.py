"""Reads as data, so that several travel in one round trip.

A session's start sends its own INSERT and every read its prompt and scrubber need in one query
on PostgreSQL, where each read took a round trip of its own and Django's cursor work around it.
A `Read` is the SQL, its parameters and how to turn the answer into what the reader wants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Model

from openhive.core.compiled import column_names, instances
from openhive.core.prepared import prepared


@dataclass(frozen=True)
class Read:
    """A query and `decode(column names, rows)`, which makes its answer."""

    sql: str
    params: list
    decode: Callable[[list[str], list[tuple]], Any]

    @classmethod
    def of(cls, model: type[Model], sql: str, params: list, then: Callable = list) -> Read:
        """Model instances, as `raw_rows` makes them, passed through `then`."""
        return cls(sql, list(params), lambda columns, rows: then(instances(model, columns, rows)))


def run_reads(reads: list[Read]) -> list[Any]:
    """Each read's answer, in order: one query of them all where several statements may share
    one (`statements_in_one_query`), else one query each."""
    if not reads:
        return []
    # Here, not at the top: `core.db` imports `core.rows`, which sends reads after an INSERT.
    from openhive.core.db import statements_in_one_query

    if len(reads) > 1 and statements_in_one_query():
        with connection.cursor() as cursor:
            cursor.execute(
                "; ".join(prepared(r.sql) for r in reads), [p for r in reads for p in r.params]
            )
            return answers_from(cursor, reads)
    answers = []
    for read in reads:
        with connection.cursor() as cursor:
            cursor.execute(prepared(read.sql), read.params)
            answers.append(_answer(cursor, read))
    return answers


def answers_from(cursor: Any, reads: list[Read]) -> list[Any]:
    """The answers of `reads`, the last statements of the query `cursor` ran (one result set
    each, the cursor on the first of them)."""
    answers = [_answer(cursor, reads[0])]
    for read in reads[1:]:
        cursor.nextset()
        answers.append(_answer(cursor, read))
    return answers


def _answer(cursor: Any, read: Read) -> Any:
    rows = cursor.fetchall()
    columns = column_names(cursor) if rows else []
    return read.decode(columns, rows)

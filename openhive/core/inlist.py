"""A column matched against many values through one query parameter.

`filter(column__in=values)` compiles a placeholder per value, each prepared through the field:
for a chat burst's 500 senders, or the outbox poll's 500 connected channels, building that list
cost the process more than the database spent running the query, and it held the GIL the
event loop needed for the burst's acks. `any_of(values)` is a subquery over ONE parameter
holding them all (a JSON array on SQLite, an array on PostgreSQL): the SQL is the same text for
any number of values, and SQLite's cap on parameters no longer applies."""

from __future__ import annotations

import json
from collections.abc import Iterable

from django.db import connection
from django.db.models.expressions import RawSQL

# The PostgreSQL array types the values may have.
ARRAY_TYPES = frozenset({"text", "bigint"})


def any_of(values: Iterable[str] | Iterable[int], *, of: str = "text") -> RawSQL:
    """`filter(column__in=any_of(values))`: text values (`of="text"`) or integers
    (`of="bigint"`)."""
    if of not in ARRAY_TYPES:
        raise ValueError(f"any_of takes text or bigint values, not {of!r}")
    values = list(values)
    if connection.vendor == "postgresql":
        return RawSQL(f"SELECT unnest(%s::{of}[])", (values,))
    return RawSQL("SELECT value FROM json_each(%s)", (json.dumps(values),))

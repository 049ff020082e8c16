"""Captured queries as the code wrote them, for tests that count or read statements."""

from __future__ import annotations

from openhive.core.prepared import unprepared


def as_written(queries: list[dict]) -> list[dict]:
    """Each query with its prepared statements' EXECUTEs put back as their SQL; the PREPAREs
    themselves (once per connection and statement, `openhive.core.prepared`) left out."""
    return [
        {**query, "sql": unprepared(query["sql"])}
        for query in queries
        if not query["sql"].startswith(("PREPARE oh_", "DEALLOCATE oh_"))
    ]

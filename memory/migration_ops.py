"""Migration operations that act on one database vendor only: the HNSW and GIN indexes and the
tsvector trigger exist on PostgreSQL, the FTS5 table and its triggers on SQLite. The migration
state is the same on both, so `makemigrations` stays quiet."""

from __future__ import annotations

from typing import Any

from django.db import migrations


class _PostgresOnly:
    """Runs the operation's database side on PostgreSQL only; the state changes everywhere."""

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(  # type: ignore[misc]
                app_label, schema_editor, from_state, to_state
            )

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(  # type: ignore[misc]
                app_label, schema_editor, from_state, to_state
            )


class PostgresOnlyAddIndex(_PostgresOnly, migrations.AddIndex):
    """AddIndex that creates the index on PostgreSQL only (SQLite cannot parse HNSW/GIN)."""


class PostgresOnlyRemoveIndex(_PostgresOnly, migrations.RemoveIndex):
    """RemoveIndex for the indexes that PostgresOnlyAddIndex made (SQLite never had them)."""


class VendorSQL(migrations.RunSQL):
    """RunSQL for one vendor; a no-op elsewhere."""

    def __init__(self, vendor: str, sql: list[str], reverse_sql: list[str]) -> None:
        super().__init__(sql, reverse_sql)
        self.vendor = vendor

    def deconstruct(self) -> tuple:
        name, args, kwargs = super().deconstruct()
        return name, args, {**kwargs, "vendor": self.vendor}

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any):
        if schema_editor.connection.vendor == self.vendor:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ):
        if schema_editor.connection.vendor == self.vendor:
            super().database_backwards(app_label, schema_editor, from_state, to_state)


CHUNK_TABLE = "memory_memorychunk"

# External-content FTS5 over the chunk table (porter stemming, like PostgreSQL's english
# config), kept in step by triggers so bulk inserts and cascading deletes stay consistent.
SQLITE_FTS = [
    "CREATE VIRTUAL TABLE memory_chunk_fts USING fts5(content, content='memory_memorychunk', "
    "content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER memory_chunk_fts_ai AFTER INSERT ON memory_memorychunk BEGIN "
    "INSERT INTO memory_chunk_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER memory_chunk_fts_ad AFTER DELETE ON memory_memorychunk BEGIN "
    "INSERT INTO memory_chunk_fts(memory_chunk_fts, rowid, content) "
    "VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER memory_chunk_fts_au AFTER UPDATE OF content ON memory_memorychunk BEGIN "
    "INSERT INTO memory_chunk_fts(memory_chunk_fts, rowid, content) "
    "VALUES ('delete', old.id, old.content); "
    "INSERT INTO memory_chunk_fts(rowid, content) VALUES (new.id, new.content); END",
]
SQLITE_FTS_REVERSE = [
    "DROP TRIGGER IF EXISTS memory_chunk_fts_au",
    "DROP TRIGGER IF EXISTS memory_chunk_fts_ad",
    "DROP TRIGGER IF EXISTS memory_chunk_fts_ai",
    "DROP TABLE IF EXISTS memory_chunk_fts",
]

POSTGRES_TSVECTOR = [
    "CREATE TRIGGER memory_chunk_tsvector BEFORE INSERT OR UPDATE OF content "
    "ON memory_memorychunk FOR EACH ROW EXECUTE FUNCTION "
    "tsvector_update_trigger(search_vector, 'pg_catalog.english', content)",
]
POSTGRES_TSVECTOR_REVERSE = ["DROP TRIGGER IF EXISTS memory_chunk_tsvector ON memory_memorychunk"]

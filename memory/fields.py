"""A 384-dim embedding column for both databases: pgvector's `vector(384)` on PostgreSQL (HNSW
index, `<=>` in SQL); raw float32 bytes on SQLite, where search scans a team's vectors exactly
with numpy (parsing pgvector's text form for thousands of rows would dominate the scan)."""

from __future__ import annotations

from typing import Any

from pgvector.django import VectorField


class EmbeddingField(VectorField):
    def db_type(self, connection: Any) -> str:
        if connection.vendor == "sqlite":
            return "blob"
        return super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor == "sqlite":
            if value is None:
                return None
            import numpy as np  # here, not at import: a worker that never embeds skips it

            return np.asarray(value, dtype=np.float32).tobytes()
        return super().get_db_prep_value(value, connection, prepared)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        if connection.vendor == "sqlite":
            import numpy as np

            return np.frombuffer(value, dtype=np.float32)
        return super().from_db_value(value, expression, connection)

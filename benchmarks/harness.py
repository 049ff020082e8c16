"""What every in-process benchmark needs: a throwaway data dir and database, Django set up on
them, and everything removed afterwards.

    with throwaway_django("openhive-step-") as (data, vendor):
        ...  # Django is set up and migrated; `data` is OPENHIVE_DATA_DIR

DATABASE_URL=postgres://... makes (and at the end drops) a database of its own on that server;
otherwise SQLite in the temp dir.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def throwaway_django(prefix: str, *, log_level: str = "WARNING") -> Iterator[tuple[Path, str]]:
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    data = tmp / "data"
    (data / "config").mkdir(parents=True)
    (data / "scripts").mkdir()
    os.environ["OPENHIVE_DATA_DIR"] = str(data)
    os.environ["OPENHIVE_RUN_DIR"] = str(tmp / "run")
    os.environ["OPENHIVE_LOG_LEVEL"] = log_level
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        os.environ.pop(name, None)
    base = os.environ.get("DATABASE_URL", "")
    admin = db_url = ""
    if base.startswith(("postgres://", "postgresql://")):
        import psycopg

        parts = urlsplit(base)
        admin = urlunsplit(parts._replace(path="/postgres"))
        db_url = urlunsplit(parts._replace(path=f"/openhive_bench_{uuid.uuid4().hex[:8]}"))
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{urlsplit(db_url).path[1:]}"')
        os.environ["DATABASE_URL"] = db_url
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, connections

    try:
        call_command("migrate", verbosity=0)
        yield data, connection.vendor
    finally:
        connections.close_all()
        if db_url:
            import psycopg

            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{urlsplit(db_url).path[1:]}" WITH (FORCE)')
        shutil.rmtree(tmp, ignore_errors=True)

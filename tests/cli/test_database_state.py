"""A verb started on a database it cannot use yet says so in a few lines, with the fix, and
changes nothing: one never migrated (a fresh data dir, an empty PostgreSQL database), one a
version behind, and a PostgreSQL server reached through its Unix socket."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from openhive.core.dburl import database_config, explain_connection_error
from tests.cli.test_startup_errors import _env, _free_port, _openhive, _postgres_base
from tests.e2e.conftest import ROOT

MIGRATE_FIX = "Fix: run `uv run python manage.py migrate`"
SOCKET_DIR = Path("/var/run/postgresql")


def _explained(result: subprocess.CompletedProcess, reason: str) -> str:
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in output
    assert reason in output, output
    assert len(output.strip().splitlines()) <= 4, output
    return output


def _tables(path: Path) -> list[str]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]


@pytest.mark.parametrize(
    "verb",
    [["status"], ["token", "create", "someone"], ["worker", "--exit-when-idle", "1"]],
    ids=["status", "token", "worker"],
)
def test_a_verb_on_a_fresh_data_dir_says_to_migrate_and_creates_no_table(tmp_path, verb):
    result = _openhive(_env(tmp_path), *verb)
    output = _explained(result, "The database has no tables yet (never migrated).")
    assert MIGRATE_FIX in output and "openhive serve" in output
    assert str(tmp_path / "data" / "openhive.sqlite3") in output
    assert _tables(tmp_path / "data" / "openhive.sqlite3") == []


def test_serve_told_not_to_migrate_refuses_a_database_never_migrated(tmp_path):
    result = _openhive(_env(tmp_path), "serve", "--no-migrate", "--port", str(_free_port()))
    _explained(result, "has no tables yet")
    assert _tables(tmp_path / "data" / "openhive.sqlite3") == []


def test_a_database_one_version_behind_names_how_many_migrations_to_apply(tmp_path):
    env = _env(tmp_path)
    manage = [sys.executable, "manage.py"]
    for step in (["migrate"], ["migrate", "engine", "0007"]):
        subprocess.run([*manage, *step, "-v", "0"], cwd=ROOT, env=env, check=True)
    result = _openhive(env, "status")
    _explained(result, "is not up to date with this version (1 migration(s) to apply)")
    # Migrated, the same verb answers.
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    assert _openhive(env, "status").returncode == 0


# --- PostgreSQL through its Unix socket ----------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgres://me@%2Fvar%2Frun%2Fpostgresql/openhive",  # libpq's own form
        "postgres:////var/run/postgresql/openhive",
    ],
)
def test_a_socket_directory_in_the_url_is_the_host_the_driver_gets(url):
    config = database_config(url)
    assert config["HOST"] == "/var/run/postgresql" and config["NAME"] == "openhive"


def test_a_missing_socket_directory_is_named_with_the_fix():
    url = "postgres://me@%2Fno%2Fsuch%2Fdir/openhive"
    error = OSError(
        'connection to server on socket "/no/such/dir/.s.PGSQL.5432" failed: No such file or '
        "directory"
    )
    text = explain_connection_error(error, url)
    assert "no PostgreSQL socket is in /no/such/dir" in text
    assert "unix_socket_directories" in text and "%2F" not in text.split("\n")[0]


@pytest.mark.parametrize(
    "url",
    [
        "postgres://me@%2Fvar%2Frun%2Fpostgresql/missing",
        "postgres://me@/missing?host=/var/run/postgresql",
        "postgres:////var/run/postgresql/missing",  # the directory is in the path here
    ],
)
def test_a_missing_database_behind_a_socket_is_named_as_the_driver_reads_it(url):
    error = OSError('connection failed: FATAL:  database "missing" does not exist')
    first_line, _url, fix = explain_connection_error(error, url).splitlines()
    assert first_line.endswith('the socket in /var/run/postgresql has no database "missing".')
    assert "createdb -h /var/run/postgresql -p 5432" in fix and fix.split(")")[0].endswith(
        " missing"
    )


def test_a_verb_reaches_postgresql_through_its_socket_and_is_told_to_migrate(tmp_path):
    base = _postgres_base()
    if not (SOCKET_DIR / ".s.PGSQL.5432").exists():
        pytest.skip("no PostgreSQL socket in /var/run/postgresql")
    import psycopg

    name = f"openhive_socket_{tmp_path.name[-12:].replace('-', '_')}".lower()
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"postgres://postgres@{quote(str(SOCKET_DIR), safe='')}/{name}"
        result = _openhive(_env(tmp_path, DATABASE_URL=url), "status")
        if "password" in result.stderr:
            pytest.skip("this server asks a password on its socket")
        # Past the connection (it would say "Cannot connect"), to the state of its tables.
        _explained(result, "The database has no tables yet (never migrated).")
        missing = url.replace(quote(str(SOCKET_DIR), safe=""), quote("/no/such/dir", safe=""))
        result = _openhive(_env(tmp_path, DATABASE_URL=missing), "status")
        _explained(result, "no PostgreSQL socket is in /no/such/dir")
    finally:
        with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.django_db
@pytest.mark.parametrize("namespace", [False, True], ids=["package", "namespace package"])
def test_a_migration_file_not_applied_is_found_unless_django_would_not_migrate_it(
    tmp_path, monkeypatch, settings, namespace
):
    from django.db import connection

    from openhive.core.dburl import _migration_state

    folder = tmp_path / f"extra_migrations_{int(namespace)}"
    folder.mkdir()
    if not namespace:
        (folder / "__init__.py").write_text("")
    (folder / "0099_extra.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings.MIGRATION_MODULES = {"vault": folder.name}
    applied, missing = _migration_state(connection)
    assert applied > 0
    assert missing == ([] if namespace else [("vault", "0099_extra")])

"""DATABASE_URL explained: a URL that cannot be used, or a database that does not answer, is a
few lines naming the variable and the fix, never a traceback. `database_config` runs while the
settings load (and `manage.py` prints its error); `database_problem` runs before a CLI verb."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import environ
from django.core.exceptions import ImproperlyConfigured

SUPPORTED = {
    "django.db.backends.postgresql": "postgres",
    "django.db.backends.sqlite3": "sqlite",
}
EXAMPLE = "postgres://USER:PASSWORD@HOST:5432/NAME"
UNSET_ADVICE = "or unset DATABASE_URL to use the embedded SQLite database in the data dir"


class DatabaseUrlError(ImproperlyConfigured):
    """DATABASE_URL cannot be used; the message is meant for the operator as it is."""


def shown_url(url: str) -> str:
    """The URL with its password replaced: safe to print."""
    try:
        parts = urlsplit(url)
        if parts.password:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
            return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        pass
    return url


def database_config(url: str) -> dict[str, Any]:
    """Django's DATABASES entry for DATABASE_URL, or DatabaseUrlError saying what is wrong."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # django-environ warns, then returns an empty engine
        try:
            config = environ.Env.db_url_config(url)
        except (ValueError, KeyError) as exc:
            why = "its port is not a number" if "Port" in str(exc) else f"it cannot be read ({exc})"
            raise DatabaseUrlError(_unusable(url, why)) from None
    engine = config.get("ENGINE") or ""
    if engine not in SUPPORTED:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        why = (
            f'the scheme "{scheme}" is not supported (use postgres:// or sqlite://)'
            if scheme
            else "it is not a URL (scheme://host/name)"
        )
        raise DatabaseUrlError(_unusable(url, why))
    if engine == "django.db.backends.postgresql" and not config.get("NAME"):
        raise DatabaseUrlError(_unusable(url, "it names no database (…/NAME at the end)"))
    # libpq's own URL form for a Unix socket puts its directory, percent-encoded, where the host
    # goes (postgres://user@%2Fvar%2Frun%2Fpostgresql/db); django-environ leaves it encoded,
    # and the driver then looks the text up as a host name.
    host = str(config.get("HOST") or "")
    if host.lower().startswith("%2f"):
        config["HOST"] = unquote(host)
    config.setdefault("CONN_HEALTH_CHECKS", True)
    return config


def _unusable(url: str, why: str) -> str:
    return (
        f"DATABASE_URL cannot be used: {why}.\n"
        f"  DATABASE_URL={shown_url(url)!r}\n"
        f"Fix: set it to {EXAMPLE} (PostgreSQL with pgvector), {UNSET_ADVICE}."
    )


def explain_connection_error(exc: Exception, url: str) -> str:
    """A connection failure as what the operator should do about it."""
    text = " ".join(str(exc).split())
    parts = urlsplit(url)
    socket_dir = _socket_dir(url)
    where = (
        f"the socket in {socket_dir}"
        if socket_dir
        else f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
    )
    # As the driver reads it: in postgres:////dir/name the path holds the socket directory too.
    name = str(_config(url).get("NAME") or parts.path.lstrip("/"))
    if "does not exist" in text and "database" in text:
        why = f'PostgreSQL at {where} has no database "{name}"'
        fix = (
            f"create it (createdb -h {socket_dir or parts.hostname or 'localhost'} "
            f"-p {parts.port or 5432} "
            f"-U {parts.username or 'postgres'} {name}) or name an existing one in DATABASE_URL"
        )
    elif "password authentication failed" in text or "no password supplied" in text:
        why = f"PostgreSQL at {where} refused the user name or password"
        fix = "correct the user and password in DATABASE_URL"
    elif "Connection refused" in text or "could not connect" in text or "timeout" in text:
        why = f"nothing answers at {where}"
        fix = "start PostgreSQL there, or correct the host and port in DATABASE_URL"
    elif socket_dir and "No such file or directory" in text:
        why = f"no PostgreSQL socket is in {socket_dir}"
        fix = (
            "start PostgreSQL, or name the directory its socket is in (SHOW "
            "unix_socket_directories) in DATABASE_URL"
        )
    elif "could not translate host name" in text or "Name or service not known" in text:
        why = f'the host "{parts.hostname}" is unknown'
        fix = "correct the host in DATABASE_URL"
    else:
        why = f"the database did not accept a connection ({text[:200]})"
        fix = "check the server and DATABASE_URL"
    return (
        f"Cannot connect to the database: {why}.\n"
        f"  DATABASE_URL={shown_url(url)!r}\n"
        f"Fix: {fix}; {UNSET_ADVICE}."
    )


def _socket_dir(url: str) -> str:
    """The socket directory a PostgreSQL URL names, or "": as the host (percent-encoded, or
    as the path of postgres:////dir/db) or as `?host=/dir`."""
    config = _config(url)
    host = str(config.get("HOST") or (config.get("OPTIONS") or {}).get("host") or "")
    return host if host.startswith("/") else ""


def _config(url: str) -> dict[str, Any]:
    try:
        return database_config(url)
    except DatabaseUrlError:
        return {}


NO_PGVECTOR = (
    "The PostgreSQL server in DATABASE_URL has no pgvector extension (memory embeddings need "
    "it).\n"
    "  DATABASE_URL={url!r}\n"
    "Fix: install it on the server (Debian: apt-get install postgresql-<version>-pgvector; "
    "see github.com/pgvector/pgvector), {advice}."
)


def database_problem(connection: Any, url: str) -> str:
    """Why the configured database cannot be used, or "" (one connection, one query)."""
    from django.db import DatabaseError

    try:
        connection.ensure_connection()
    except DatabaseError as exc:
        if not url:
            return f"Cannot open the embedded SQLite database: {exc}."
        return explain_connection_error(exc, url)
    if connection.vendor != "postgresql":
        return ""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector' "
            "UNION SELECT 1 FROM pg_extension WHERE extname = 'vector'"
        )
        if cursor.fetchone() is None:
            return NO_PGVECTOR.format(url=shown_url(url), advice=UNSET_ADVICE)
    return ""


# Set by `serve` for the processes it starts once it has migrated the database.
MIGRATED_ENV = "OPENHIVE_MIGRATED"


def migration_problem(connection: Any, url: str) -> str:
    """Why the database's tables do not match this code, or "": never migrated (a fresh data
    dir or an empty PostgreSQL database), or migrations of a newer version not applied yet.
    Without this, the first query fails with a traceback about a missing table."""
    applied, missing = _migration_state(connection)
    if not missing:
        return ""
    name = connection.settings_dict["NAME"]
    where = f"DATABASE_URL={shown_url(url)!r}" if url else f"SQLite database: {name}"
    state = (
        "has no tables yet (never migrated)"
        if not applied
        else f"is not up to date with this version ({len(missing)} migration(s) to apply)"
    )
    return (
        f"The database {state}.\n"
        f"  {where}\n"
        "Fix: run `uv run python manage.py migrate`, or start `manage.py openhive serve` "
        "(it migrates first)."
    )


def _migration_state(connection: Any) -> tuple[int, list[tuple[str, str]]]:
    """(how many migrations the database has applied, the migration files it has not). Read
    from the files' names, not by importing them as Django's migration loader does: a worker
    would keep every migration module in memory (~3 MB) for one check at its start. Applying
    a squashed migration records the ones it replaces too, so every file is recorded once a
    database is up to date."""
    from django.apps import apps
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.recorder import MigrationRecorder

    recorder = MigrationRecorder(connection)
    applied = set(recorder.applied_migrations()) if recorder.has_table() else set()
    missing = []
    for app in apps.get_app_configs():
        module, _explicit = MigrationLoader.migrations_module(app.label)
        try:
            spec = importlib.util.find_spec(module) if module else None
        except ImportError:
            spec = None
        if spec is None or spec.origin in (None, "namespace"):
            continue  # no migrations, or a namespace package, which Django does not migrate
        for folder in spec.submodule_search_locations or []:
            for path in sorted(Path(folder).glob("*.py")):
                key = (app.label, path.stem)
                if path.stem[0] not in "_~" and key not in applied:
                    missing.append(key)
    return len(applied), missing

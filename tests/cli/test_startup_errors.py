"""What an operator sees when `serve` cannot start, run as they run it (a separate process): a
taken port, or a DATABASE_URL that cannot be used, is a few lines naming the port and
`--port`, or the variable and the fix, never a banner followed by a buried traceback. And a
good first start prints one banner, once the port answers, with no noise before it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from openhive.core.dburl import NO_PGVECTOR, database_problem
from tests.e2e.conftest import ROOT


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "OPENHIVE_"))}
    env["OPENHIVE_DATA_DIR"] = str(tmp_path / "data")
    env.update(extra)
    return env


def _openhive(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "openhive", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_on_a_taken_port_exits_at_once_with_one_line_naming_the_port(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _openhive(_env(tmp_path), "serve", "--port", str(port), timeout=30)
    assert result.returncode != 0
    assert "ready" not in result.stdout and "serving" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert str(port) in lines[0] and "--port" in lines[0]
    assert "already in use" in lines[0]


def _postgres_base() -> str:
    """A PostgreSQL server to ask for a database that does not exist (skip without one)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = "postgres://postgres@127.0.0.1:5432/postgres"
    base = url.rsplit("/", 1)[0]
    try:
        import psycopg

        psycopg.connect(f"{base}/postgres", connect_timeout=3).close()
    except Exception:
        pytest.skip("no PostgreSQL server to connect to")
    return base


BAD_URLS = {
    "not a url": ("postgres//x", "not a URL"),
    "unknown scheme": ("mysqlx://a@b/c", '"mysqlx" is not supported'),
    "port not a number": ("postgres://u:hunter2pw@127.0.0.1:notaport/db", "port is not a number"),
    "no database name": ("postgres://u@127.0.0.1:5432", "names no database"),
}


@pytest.mark.parametrize("case", list(BAD_URLS))
def test_an_unparseable_database_url_is_a_few_lines_naming_the_variable(tmp_path, case):
    url, reason = BAD_URLS[case]
    result = _openhive(_env(tmp_path, DATABASE_URL=url), "serve", "--port", str(_free_port()))
    _assert_explained(result, reason)
    assert result.returncode == 2


def test_a_refused_database_connection_names_the_address_and_the_fix(tmp_path):
    url = f"postgres://postgres@127.0.0.1:{_free_port()}/openhive"
    result = _openhive(_env(tmp_path, DATABASE_URL=url), "serve", "--port", str(_free_port()))
    _assert_explained(result, "nothing answers at 127.0.0.1")
    assert "start PostgreSQL there" in result.stderr


def test_a_database_that_does_not_exist_says_how_to_create_it(tmp_path):
    url = f"{_postgres_base()}/openhive_no_such_db_for_tests"
    result = _openhive(_env(tmp_path, DATABASE_URL=url), "serve", "--port", str(_free_port()))
    _assert_explained(result, 'has no database "openhive_no_such_db_for_tests"')
    assert "createdb" in result.stderr


def _assert_explained(result: subprocess.CompletedProcess, reason: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in output
    assert "DATABASE_URL" in output and reason in output, output
    assert "Fix:" in output
    assert len(output.strip().splitlines()) <= 5, output
    assert "hunter2pw" not in output  # the password is masked


class _NoVectorCursor:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql):
        self.sql = sql

    def fetchone(self):
        return None  # the server offers no `vector` extension


class _PostgresWithoutPgvector:
    vendor = "postgresql"

    def ensure_connection(self):
        pass

    def cursor(self):
        return _NoVectorCursor()


def test_a_postgres_server_without_pgvector_says_to_install_it():
    # No server here lacks pgvector: the check's answer is given, the message is the real one.
    problem = database_problem(_PostgresWithoutPgvector(), "postgres://u:pw@db:5432/openhive")
    assert problem == NO_PGVECTOR.format(
        url="postgres://u:***@db:5432/openhive",
        advice="or unset DATABASE_URL to use the embedded SQLite database in the data dir",
    )
    assert "pgvector" in problem and "DATABASE_URL" in problem


def test_a_first_start_prints_one_banner_naming_the_chat_once_the_port_answers(tmp_path):
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "openhive", "serve", "--port", str(port)],
        cwd=ROOT,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("OpenHive is ready"):
                # The banner comes only once the port answers: this request needs no retry.
                assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200
                break
        else:
            pytest.fail("no banner within 120 s:\n" + "".join(lines))
        for _ in range(4):  # the rest of the banner
            lines.append(process.stdout.readline())
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        rest, _ = process.communicate(timeout=30)
    output = "".join(lines)
    assert f"http://localhost:{port}/chat/" in output
    assert output.count("OpenHive is ready") == 1
    for noise in (".env", "HTTP/2", "Traceback", "CRITICAL", "ERROR"):
        assert noise not in output + rest, noise
    # The trust notice is advice that does not claim a file exists.
    assert "No trust policy configured" not in output

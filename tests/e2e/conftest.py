"""Run the real `manage.py openhive serve` process group (the web server, a pull worker, engine
loop) on a free loopback port, against a fresh database: SQLite by default, or a new PostgreSQL
database when the suite runs with DATABASE_URL=postgres://…"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    base_url: str
    ws_url: str
    origin: str
    token: str
    process: subprocess.Popen
    log_path: Path
    started_in: float
    env: dict[str, str] | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def database_url() -> Iterator[str | None]:
    """None for SQLite; otherwise a throwaway PostgreSQL database on the configured server."""
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        yield None
        return
    import psycopg

    parts = urlsplit(base)
    name = f"openhive_e2e_{uuid.uuid4().hex[:10]}"
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def serve(tmp_path: Path, database_url: str | None) -> Iterator[Server]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "OPENHIVE_"))}
    env.update(
        OPENHIVE_DATA_DIR=str(tmp_path / "data"),
        OPENHIVE_ENGINE_TICK="0.1",
        OPENHIVE_OUTBOX_POLL="0.2",
        DJANGO_SUPERUSER_PASSWORD="e2e-password-123",
        PYTHONUNBUFFERED="1",
    )
    env.pop("REDIS_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    manage = [sys.executable, str(ROOT / "manage.py"), "openhive"]
    init = subprocess.run(
        [*manage, "init", "--demo", "--username", "e2e"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    token = re.search(r"API token: (\S+)", init.stdout).group(1)
    port = _free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        started = time.monotonic()
        process = subprocess.Popen(
            [*manage, "serve", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    server = Server(
        base_url=base_url,
        ws_url=f"ws://127.0.0.1:{port}/ws/chat/",
        origin=base_url,
        token=token,
        process=process,
        log_path=log_path,
        started_in=0.0,
        env=env,
    )
    try:
        server.started_in = _wait_healthy(server, started)
        yield server
    finally:
        _stop(process)


def _wait_healthy(server: Server, started: float) -> float:
    deadline = started + 60
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"serve exited early:\n{server.log()}")
        try:
            if httpx.get(f"{server.base_url}/api/v1/health", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"serve did not answer /api/v1/health in 60 s:\n{server.log()}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError):  # nothing of the group may outlive the test
        os.killpg(process.pid, signal.SIGKILL)

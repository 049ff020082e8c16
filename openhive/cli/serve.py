"""`serve`: migrate, then the web server (uvicorn) + a pull worker + the engine loop, stopped
together.

The worker (`openhive worker`, OPENHIVE_WORKERS threads) claims tasks straight from the task
table, so the engine loop runs its clock without handing tasks out (`--no-dispatch`). Each
child runs in a process group of its own, so serve can end it with everything it forked (the
sandboxes and MCP servers of a running task): Ctrl-C or SIGTERM, to serve or to its whole group,
stops every process within a few seconds and leaves none behind; the tasks that were running
go back to the queue at once. If one child dies, the others are stopped too."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.apps import apps as django_apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from openhive.core.dburl import MIGRATED_ENV
from tasks.services import tasks_release_dead_local_workers
from teams.services import team_ensure_main

from .base import Verb

logger = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

# SIGTERM first, SIGKILL to whatever of a child's group is left after this: within the 5 s
# that service managers and people at a terminal give.
STOP_GRACE_SECONDS = 3.0
# The banner waits this long at most for the port to answer and the workers to start (a cold
# machine imports litellm for seconds); after it, serve says what is still missing.
READY_LIMIT_SECONDS = 120.0


class Serve(Verb):
    help = (
        "serve [--port N] [--host H]: migrate, then run the web server, the workers and the "
        "engine loop together until Ctrl-C."
    )

    def migrates(self, options: dict[str, Any]) -> bool:
        return not options["no_migrate"]

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--port", type=int, default=8000, help="the web server's port (default 8000)"
        )
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="the address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)",
        )
        parser.add_argument(
            "--no-migrate", action="store_true", help="skip migrations (they ran already)"
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        host, port = options["host"], options["port"]
        # Before anything starts: a taken port is one line, not a banner and a buried error.
        problem = port_problem(host, port)
        if problem:
            raise CommandError(problem)
        if not options["no_migrate"]:
            migrate_if_behind()
        team_ensure_main()
        manage = str(settings.BASE_DIR / "manage.py")
        specs = {
            "web": [sys.executable, "-m", "openhive.webserver", host, str(port)],
            # This command ran the system checks before starting its children.
            "workers": [
                *[sys.executable, manage, "openhive", "--skip-checks", "worker"],
                *["--threads", str(settings.Q_CLUSTER["workers"])],
            ],
            "engine": [
                *[sys.executable, manage, "openhive", "--skip-checks", "engine"],
                "--no-dispatch",
            ],
        }
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        _adopt_orphans()
        # The web server imports litellm once it listens; the worker imports it itself.
        preload = {"web": "background", "workers": "", "engine": ""}
        ready_dir = Path(tempfile.mkdtemp(prefix="openhive-ready-"))
        children = {
            name: subprocess.Popen(
                cmd,
                env={
                    **os.environ,
                    "OPENHIVE_PRELOAD_LLM": preload[name],
                    MIGRATED_ENV: "1",
                    "OPENHIVE_READY_DIR": str(ready_dir),
                },
                start_new_session=True,
                preexec_fn=_stop_with_parent,
            )
            for name, cmd in specs.items()
        }
        shown = "localhost" if host in ("127.0.0.1", "::1") else host
        base = f"http://{shown}:{port}"
        waiting = Readiness(host, port, ready_dir, workers=1)
        exit_code = 0
        while not stop.is_set():
            for name, child in children.items():
                if child.poll() is not None:
                    command.stderr.write(f"{name} exited with code {child.returncode}; stopping")
                    exit_code = 1
                    stop.set()
                    break
            if not stop.is_set() and waiting.pending and waiting.check():
                command.stdout.write(
                    f"OpenHive is ready: {base}/\n"
                    f"  chat    {base}/chat/\n"
                    f"  admin   {base}/admin/\n"
                    f"  API     {base}/api/v1/docs\n"
                    "Ctrl-C stops it."
                )
                sys.stdout.flush()
            elif waiting.pending and waiting.overdue():
                command.stderr.write(
                    f"Still starting after {READY_LIMIT_SECONDS:g} s: {waiting.missing()}."
                )
                waiting.pending = False
            stop.wait(0.2 if waiting.pending else 0.5)
        _stop_all(children)
        with contextlib.suppress(OSError):
            for leftover in ready_dir.iterdir():
                leftover.unlink()
            ready_dir.rmdir()
        if exit_code:
            raise SystemExit(exit_code)


def migrate_if_behind() -> None:
    """`migrate`, when the database lacks a migration (or an app has none to track it). With
    nothing to apply, migrate still renders every model's state and sends post_migrate (content
    types, permissions): ~0.4 s of every start on a slow 2-core machine, for nothing."""
    executor = MigrationExecutor(connection)
    behind = executor.migration_plan(executor.loader.graph.leaf_nodes())
    untracked = any(
        list(django_apps.get_app_config(label).get_models())
        for label in executor.loader.unmigrated_apps
    )
    if behind or untracked:
        call_command("migrate", interactive=False, verbosity=0)


def port_problem(host: str, port: int) -> str:
    """Why the web server could not listen on host:port, or "" (bound as asyncio binds: with
    SO_REUSEADDR, so a port in TIME_WAIT is not reported as taken)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"--host {host}: cannot resolve it ({exc.strerror})."
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"Port {port} on {host} is already in use (another serve?): stop that "
                    f"process or choose another port with --port {port + 1}."
                )
            if exc.errno == errno.EACCES:
                return f"Port {port} needs root privileges: choose one above 1023 with --port."
            return f"Cannot listen on {host}:{port}: {exc.strerror}."
    return ""


class Readiness:
    """Started = the port answers and every worker process has announced itself (each
    touches a file in `ready_dir`: `openhive worker` once it claims, a django-q2 worker once
    spawned, see openhive.apps)."""

    def __init__(self, host: str, port: int, ready_dir: Path, workers: int) -> None:
        self.host, self.port, self.ready_dir = host, port, ready_dir
        self.workers = max(1, workers)
        self.started = time.monotonic()
        self.pending = True
        self.port_answers = False

    def check(self) -> bool:
        if not self.port_answers:
            with contextlib.suppress(OSError):
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                self.port_answers = True
        if self.port_answers and self.workers_ready() >= self.workers:
            self.pending = False
            return True
        return False

    def workers_ready(self) -> int:
        with contextlib.suppress(OSError):
            return sum(1 for _ in self.ready_dir.glob("worker-*"))
        return 0

    def overdue(self) -> bool:
        return time.monotonic() - self.started > READY_LIMIT_SECONDS

    def missing(self) -> str:
        parts = [] if self.port_answers else [f"port {self.port} does not answer yet"]
        parts.append(f"{self.workers_ready()} of {self.workers} worker(s) ready")
        return ", ".join(parts)


def _stop_all(children: dict[str, subprocess.Popen]) -> None:
    for child in children.values():
        _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for child in children.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=max(0.05, deadline - time.monotonic()))
    # A child that exited may have left forked processes in its group (a task's sandbox or
    # MCP server; a qcluster's workers outlive their parent): end every group, then reap.
    for child in children.values():
        _signal_group(child, signal.SIGKILL)
        child.wait()
    _reap_adopted()
    _release_interrupted_tasks()


def _adopt_orphans() -> None:
    """Become the reaper of our descendants: a process whose parent dies first (a sandbox
    whose worker was killed) is re-parented to serve, not to PID 1, so serve
    can collect it and leave no zombie behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)


def _reap_adopted(limit_seconds: float = 2.0) -> None:
    deadline = time.monotonic() + limit_seconds
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.02)


def _signal_group(child: subprocess.Popen, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, sig)


def _release_interrupted_tasks() -> None:
    try:
        released = tasks_release_dead_local_workers()
    except Exception:  # the database may be the reason we stop; the reaper covers it later
        logger.warning("could not hand back running tasks; their leases will expire instead")
        return
    if released:
        logger.info("handed %d running task(s) back to the queue: %s", len(released), released)


def _stop_with_parent() -> None:
    """In the child before exec: if serve dies without stopping it (SIGKILL), the child is
    told to stop rather than left running on its own."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Engine(Verb):
    help = (
        "engine [--no-dispatch]: run the engine loop alone (it fires triggers, reaps expired "
        "leases and hands queued tasks to `manage.py qcluster` workers); several may run, one "
        "leads."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--no-dispatch",
            action="store_true",
            help="hand no task to qcluster: the workers are `manage.py openhive worker` "
            "processes, which claim tasks themselves (as under `serve`)",
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        from openhive.clock import EngineLoop

        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        EngineLoop(dispatching=not options["no_dispatch"]).run(stop)

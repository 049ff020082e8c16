"""Collecting a child process's output: stdin fed and stdout/stderr read together (no pipe can
fill up and stall the child), a wall-clock deadline, a cap on what is kept of each stream, and
a hard limit past which the child is stopped. Used by the sandbox runner."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

MiB = 1024 * 1024
HARD_OUTPUT_LIMIT = 16 * MiB  # past this much output the command is stopped, not just cut

Status = Literal["ok", "timeout", "output_limit", "unavailable"]


@dataclass
class Collected:
    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    reason: str


@dataclass
class _Streams:
    cap: int
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    total: int = 0
    truncated: bool = False

    def add(self, target: bytearray, chunk: bytes) -> None:
        # Each stream has its own cap: a verbose stdout must not hide the error on stderr.
        self.total += len(chunk)
        room = self.cap - len(target)
        if len(chunk) > room:
            self.truncated = True
        target.extend(chunk[: max(room, 0)])


def collect(
    proc: subprocess.Popen,
    stdin: bytes | None,
    timeout: float,
    output_cap: int,
    kill_rest: Callable[[], None] | None = None,
) -> Collected:
    """Feed `stdin`, read both streams until the child closes them, then wait for it. On the
    deadline or the hard output limit the child's process group (and `kill_rest`) is killed."""
    streams = _Streams(cap=output_cap)
    deadline = time.monotonic() + timeout
    pending = memoryview(stdin or b"")
    status: Status = "ok"
    with selectors.DefaultSelector() as sel:
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ, streams.out)
        sel.register(proc.stderr, selectors.EVENT_READ, streams.err)
        if proc.stdin is not None:
            if pending:
                sel.register(proc.stdin, selectors.EVENT_WRITE, None)
            else:
                proc.stdin.close()
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                status = "timeout"
                break
            for key, _ in sel.select(timeout=min(remaining, 0.5)):
                if key.data is None:  # stdin
                    try:
                        written = os.write(key.fd, pending[:65536])
                    except BrokenPipeError:
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()  # type: ignore[union-attr]
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                streams.add(key.data, chunk)
            if streams.total > HARD_OUTPUT_LIMIT:
                status = "output_limit"
                break
    if status != "ok":
        kill(proc, kill_rest)
    exit_code = proc.wait()
    reason = {
        "timeout": f"stopped after the {timeout:g} s timeout",
        "output_limit": f"stopped after {HARD_OUTPUT_LIMIT // MiB} MiB of output",
    }.get(status, "")
    return Collected(
        status,
        exit_code=exit_code if status == "ok" else None,
        stdout=streams.out.decode("utf-8", "replace"),
        stderr=streams.err.decode("utf-8", "replace"),
        truncated=streams.truncated,
        reason=reason,
    )


def kill(proc: subprocess.Popen, kill_rest: Callable[[], None] | None = None) -> None:
    # bubblewrap's first sandbox process dies with it (--die-with-parent), and with it the
    # whole PID namespace; the cgroup catches anything that slipped out of the session.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if kill_rest is not None:
        kill_rest()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)

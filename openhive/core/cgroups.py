"""A per-run control group that caps the processes (and memory) of one sandboxed command.

RLIMIT_NPROC is what stops a fork bomb for an ordinary user, but the kernel never applies it
to processes whose real user is root, even inside a user namespace; a worker that runs as root
(containers) needs a pids cgroup instead. This module finds a writable pids (and memory)
controller, cgroup v1 or v2, and creates one group per run below the worker's own group. Where
none is writable it says so, and the sandbox relies on RLIMIT_NPROC alone."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

GROUP_FOLDER = "openhive-sandbox"


@dataclass(frozen=True)
class _Controller:
    base: Path  # the folder our run groups go in
    limit_file: str  # pids.max / memory.max / memory.limit_in_bytes


_lock = threading.Lock()
_detected: dict[str, _Controller | None] | None = None
_counter = itertools.count()


def _own_groups() -> dict[str, str]:
    """Controller name ("" for cgroup v2) → this process's group path."""
    groups: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                groups[name] = path
    return groups


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
                continue
            found.append((fields[4], tail[0], set(tail[2].split(","))))
    return found


def _usable(folder: Path, limit_file: str) -> _Controller | None:
    base = folder / GROUP_FOLDER
    try:
        base.mkdir(exist_ok=True)
        probe = base / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        try:
            ok = (probe / limit_file).exists()
        finally:
            probe.rmdir()
    except OSError:
        return None
    return _Controller(base, limit_file) if ok else None


def _detect() -> dict[str, _Controller | None]:
    own = _own_groups()
    found: dict[str, _Controller | None] = {"pids": None, "memory": None}
    for point, fstype, options in _mounts():
        for name, v1_file, v2_file in (
            ("pids", "pids.max", "pids.max"),
            ("memory", "memory.limit_in_bytes", "memory.max"),
        ):
            if found[name] is not None:
                continue
            if fstype == "cgroup" and name in options and name in own:
                found[name] = _usable(Path(point) / own[name].lstrip("/"), v1_file)
            elif fstype == "cgroup2" and "" in own:
                found[name] = _usable(Path(point) / own[""].lstrip("/"), v2_file)
    for controller in found.values():
        if controller is not None:
            _sweep(controller.base)
    return found


def _sweep(base: Path) -> None:
    """Remove empty groups left by runs of processes that are gone. A live process's group is
    left alone: it may be empty only because its run is between `mkdir` and `add` (several
    workers, or test runs, start on one machine at once)."""
    for stale in base.glob("run-*"):
        if _owner_alive(stale.name):
            continue
        with contextlib.suppress(OSError):
            stale.rmdir()


def _owner_alive(name: str) -> bool:
    try:
        pid = int(name.split("-")[1])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def controllers() -> dict[str, _Controller | None]:
    global _detected
    with _lock:
        if _detected is None:
            _detected = _detect()
        return _detected


def describe() -> str:
    found = controllers()
    usable = [name for name, c in found.items() if c is not None]
    return "cgroup " + "+".join(usable) if usable else "none"


class RunGroup:
    """The groups of one run. `add(pid)` before the run's command starts, `close()` after."""

    def __init__(self, *, max_processes: int, max_memory_bytes: int) -> None:
        self.folders: list[Path] = []
        name = f"run-{os.getpid()}-{next(_counter)}"
        for kind, value in (("pids", max_processes), ("memory", max_memory_bytes)):
            controller = controllers().get(kind)
            if controller is None:
                continue
            folder = controller.base / name
            try:
                folder.mkdir()
                (folder / controller.limit_file).write_text(str(value))
            except OSError as exc:
                logger.warning("sandbox: cannot create the %s cgroup %s: %s", kind, folder, exc)
                with contextlib.suppress(OSError):
                    folder.rmdir()
                continue
            self.folders.append(folder)

    def add(self, pid: int) -> None:
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(pid))

    def kill_all(self) -> None:
        for folder in self.folders:
            with contextlib.suppress(OSError):
                for line in (folder / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
                        os.kill(int(line), signal.SIGKILL)

    def close(self) -> None:
        deadline = time.monotonic() + 2.0
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        logger.debug("sandbox: cgroup %s still busy; left for the sweep", folder)
                        break
                    self.kill_all()
                    time.sleep(0.001)

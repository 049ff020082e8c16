"""Run one command in a bubblewrap sandbox: the team workspace is the only writable host path
(its config.yaml stays read-only), system folders are read-only, the data dir, other teams and
the database are not there at all; fresh user, PID, network, IPC and UTS namespaces (no network:
the web goes through web_fetch and its guard); an environment built from an allowlist; rlimits
plus a per-run pids/memory cgroup where one is writable; a wall-clock timeout and an output cap.

The command is started blocked (`--block-fd`): its limits are applied to the sandbox's first
process, whose pid bubblewrap reports on `--info-fd`, before anything of the command runs. If
bubblewrap is missing or cannot create its namespaces, the result says `unavailable` and nothing
ran; running unconfined is a separate, explicit operator choice (`allow_unsandboxed`).

Used by `bash`, and meant for skill scripts and plugin code (JSON over stdin/stdout)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from openhive.core.cgroups import RunGroup
from openhive.core.processio import Collected, MiB, Status, collect, kill

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few /etc entries programs need to start (dynamic linker, alternatives, time zone); the
# rest of /etc (shadow, machine secrets, service configs) stays out.
_ETC_ENTRIES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
)
_PASSWD = "sandbox:x:0:0:sandbox:/tmp:/bin/bash\nnobody:x:65534:65534:nobody:/:/bin/false\n"
_GROUP = "sandbox:x:0:\nnogroup:x:65534:\n"


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 600
    memory_bytes: int = 2048 * MiB  # address space per process, and the run's memory cgroup
    processes: int = 128  # processes and threads of the whole run
    file_size_bytes: int = 256 * MiB
    open_files: int = 512
    tmp_bytes: int = 64 * MiB  # the private /tmp (memory-backed)


@dataclass
class SandboxResult:
    status: Status
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    duration_ms: int = 0
    reason: str = ""
    sandboxed: bool = True
    process_cap: str = ""  # how the process limit was enforced

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.exit_code == 0


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def base_env(workspace: Path) -> dict[str, str]:
    """The whole environment of a sandboxed command: nothing is inherited from the worker."""
    return {
        "PATH": SYSTEM_PATH,
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PWD": str(workspace),
    }


def run(
    argv: Sequence[str],
    *,
    workspace: Path,
    timeout: float,
    stdin: bytes | None = None,
    limits: Limits | None = None,
    env: Mapping[str, str] | None = None,
    output_cap: int = 100_000,  # bytes kept of stdout, and of stderr
    read_only_paths: Sequence[Path] = (),
    read_only_in_workspace: Sequence[str] = ("config.yaml",),
    allow_unsandboxed: bool = False,
) -> SandboxResult:
    """Run `argv` with `workspace` as its working (and only writable) folder. `env` adds to the
    allowlisted base environment; `read_only_paths` are extra host paths shown read-only at the
    same place (an interpreter, a skill's folder)."""
    limits = limits or Limits()
    environment = {**base_env(workspace), **(env or {})}
    binary = bwrap_path()
    if binary is None:
        if allow_unsandboxed:
            return _run_unconfined(argv, workspace, timeout, stdin, limits, environment, output_cap)
        return SandboxResult(
            "unavailable",
            reason="bubblewrap (bwrap) is not installed on this machine; install the Debian "
            "package `bubblewrap` (see the README)",
        )
    return _run_bwrap(
        binary,
        argv,
        workspace=workspace,
        timeout=timeout,
        stdin=stdin,
        limits=limits,
        environment=environment,
        output_cap=output_cap,
        read_only_paths=read_only_paths,
        read_only_in_workspace=read_only_in_workspace,
    )


def _bwrap_argv(
    binary: str,
    argv: Sequence[str],
    *,
    workspace: Path,
    limits: Limits,
    environment: Mapping[str, str],
    read_only_paths: Sequence[Path],
    read_only_in_workspace: Sequence[str],
    fds: dict[str, int],
) -> list[str]:
    args = [binary, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
    args += ["--new-session", "--cap-drop", "ALL", "--hostname", "sandbox"]
    for folder in _SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for entry in _ETC_ENTRIES:
        if os.path.exists(entry):
            args += ["--ro-bind", entry, entry]
    args += ["--ro-bind-data", str(fds["passwd"]), "/etc/passwd"]
    args += ["--ro-bind-data", str(fds["group"]), "/etc/group"]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    for extra in read_only_paths:
        real = os.path.realpath(extra)
        args += ["--ro-bind", real, real]
    ws = str(workspace)
    args += ["--bind", ws, ws]
    for name in read_only_in_workspace:
        inside = workspace / name
        # A file (config.yaml) or a whole folder (a plugin run's plugins/), never a symlink.
        if (inside.is_file() or inside.is_dir()) and not inside.is_symlink():
            args += ["--ro-bind", str(inside), str(inside)]
    # The sandbox's own root (where bubblewrap made the mount points) goes read-only too: the
    # workspace and the private /tmp are the only writable places.
    args += ["--remount-ro", "/", "--chdir", ws, "--clearenv"]
    for key, value in environment.items():
        args += ["--setenv", key, value]
    args += ["--info-fd", str(fds["info"]), "--block-fd", str(fds["block"]), "--", *argv]
    return args


def _data_fd(text: str) -> int:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, text.encode())  # far below a pipe's buffer
    os.close(write_fd)
    return read_fd


def _run_bwrap(
    binary: str,
    argv: Sequence[str],
    *,
    workspace: Path,
    timeout: float,
    stdin: bytes | None,
    limits: Limits,
    environment: Mapping[str, str],
    output_cap: int,
    read_only_paths: Sequence[Path],
    read_only_in_workspace: Sequence[str],
) -> SandboxResult:
    started = time.monotonic()
    info_read, info_write = os.pipe()
    block_read, block_write = os.pipe()
    fds = {"info": info_write, "block": block_read, "passwd": _data_fd(_PASSWD)}
    fds["group"] = _data_fd(_GROUP)
    args = _bwrap_argv(
        binary,
        argv,
        workspace=workspace,
        limits=limits,
        environment=environment,
        read_only_paths=read_only_paths,
        read_only_in_workspace=read_only_in_workspace,
        fds=fds,
    )
    group = RunGroup(max_processes=limits.processes, max_memory_bytes=limits.memory_bytes)
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=tuple(fds.values()),
            env={"PATH": SYSTEM_PATH},
            start_new_session=True,
        )
    except OSError as exc:
        for fd in (info_read, block_write, *fds.values()):
            os.close(fd)
        group.close()
        return SandboxResult("unavailable", reason=f"bubblewrap could not start: {exc}")
    for fd in fds.values():
        os.close(fd)
    try:
        child = _child_pid(info_read, timeout=10.0)
        if child is None:
            proc.kill()
            _, err = proc.communicate(timeout=5)
            message = err.decode("utf-8", "replace").strip() or "no reason given"
            return SandboxResult(
                "unavailable",
                reason=f"the sandbox could not start (bubblewrap: {message}); user namespaces "
                "may be disabled on this machine",
            )
        try:
            _limit(child, limits)
            group.add(child)
        except OSError as exc:
            proc.kill()
            proc.communicate(timeout=5)
            return SandboxResult(
                "unavailable", reason=f"could not apply the sandbox's limits: {exc}"
            )
        os.write(block_write, b"1")
        result = _result(collect(proc, stdin, timeout, output_cap, group.kill_all))
    finally:
        os.close(info_read)
        with contextlib.suppress(OSError):
            os.close(block_write)
        if proc.poll() is None:
            kill(proc, group.kill_all)
        group.close()
    result.duration_ms = int((time.monotonic() - started) * 1000)
    result.process_cap = "cgroup" if group.folders else "rlimit"
    return result


def _child_pid(info_fd: int, *, timeout: float) -> int | None:
    """Read bubblewrap's info JSON (it closes the fd after writing); None if it never came."""
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(info_fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(info_fd, 4096)
            if not chunk:
                break
            data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _limit(pid: int, limits: Limits) -> None:
    for kind, value in (
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_NPROC, limits.processes),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.prlimit(pid, kind, (value, value))


def _run_unconfined(
    argv: Sequence[str],
    workspace: Path,
    timeout: float,
    stdin: bytes | None,
    limits: Limits,
    environment: Mapping[str, str],
    output_cap: int,
) -> SandboxResult:
    """The operator's explicit opt-in for machines without bubblewrap: the same environment
    allowlist, rlimits, timeout and output cap, but no file-system or network isolation."""
    started = time.monotonic()

    def apply_limits() -> None:
        _limit(os.getpid(), limits)

    proc = subprocess.Popen(
        list(argv),
        cwd=workspace,
        env=dict(environment),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=apply_limits,
    )
    result = _result(collect(proc, stdin, timeout, output_cap))
    result.sandboxed = False
    result.process_cap = "rlimit"
    result.duration_ms = int((time.monotonic() - started) * 1000)
    return result


def _result(collected: Collected) -> SandboxResult:
    return SandboxResult(
        collected.status,
        exit_code=collected.exit_code,
        stdout=collected.stdout,
        stderr=collected.stderr,
        truncated=collected.truncated,
        reason=collected.reason,
    )

"""Plugin code in the sandbox: one bubblewrap subprocess per interface check or call, never
the worker's process. The stdlib-only harness (`harness.py`) is passed with `-c`; the request
(mode, name, verified source, arguments) goes on stdin (marshalled: the harness then needs no
`json` import) and one JSON envelope comes back on stdout. The workspace is the only writable
place (its `plugins/` and `config.yaml` read-only), there is no network, the environment is
the sandbox's allowlist (no secrets), and the run has rlimits, a timeout and an output cap."""

from __future__ import annotations

import json
import marshal
import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.conf import settings

from openhive.core import sandbox

HARNESS = Path(__file__).with_name("harness.py")
CHECK_TIMEOUT = 20.0
# Processes and threads of one call: a plugin is one Python process, and may not fork.
PLUGIN_PROCESSES = 16
READ_ONLY_IN_WORKSPACE = ("config.yaml", "plugins")


@dataclass
class PluginRun:
    """What came back: `envelope` is the harness's answer, or None with `problem` saying why
    there was none (no sandbox, a timeout, a crash, output that is not JSON)."""

    envelope: dict | None
    problem: str = ""
    code: str = ""
    stderr: str = ""
    duration_ms: int = 0
    sandboxed: bool = True


@cache
def harness_source() -> str:
    return HARNESS.read_text()


def plugin_python() -> tuple[str, list[Path]]:
    """The interpreter for plugins and the host folders it needs inside the sandbox. The
    system's python3 lives under /usr (already read-only there); an operator may name another
    (OPENHIVE_PLUGIN_PYTHON), whose installation folder is then shown read-only."""
    configured = settings.OPENHIVE.get("PLUGIN_PYTHON") or ""
    if configured:
        real = Path(os.path.realpath(configured))
        return str(real), [real.parent.parent]
    if Path("/usr/bin/python3").exists():
        return "/usr/bin/python3", []
    base = Path(os.path.realpath(sys.executable))
    return str(base), [Path(sys.base_prefix)]


def timeout_seconds() -> float:
    return float(settings.OPENHIVE.get("PLUGIN_TIMEOUT_SECONDS") or 30)


def output_cap() -> int:
    return int(settings.OPENHIVE.get("PLUGIN_OUTPUT_BYTES") or 200_000)


def run_in_sandbox(
    *,
    mode: str,
    name: str,
    source: str,
    workspace: Path,
    args: dict | None = None,
    timeout: float | None = None,
) -> PluginRun:
    timeout = timeout or (CHECK_TIMEOUT if mode == "check" else timeout_seconds())
    python, extra_paths = plugin_python()
    request = {"mode": mode, "name": name, "source": source, "args": args or {}}
    config = settings.OPENHIVE
    run = sandbox.run(
        # -I: no user site, no PYTHON* variables, no script folder on the path; -S: no site
        # packages at all (a plugin has the standard library only); -B: no .pyc written.
        [python, "-I", "-S", "-B", "-c", harness_source()],
        workspace=workspace,
        timeout=timeout,
        # marshal (version 4, read by every Python 3 since 3.4): plain data from the host.
        stdin=marshal.dumps(request, 4),
        limits=sandbox.Limits(
            cpu_seconds=int(timeout) + 1,
            memory_bytes=config["SANDBOX_MEMORY_MB"] * sandbox.MiB,
            processes=min(PLUGIN_PROCESSES, config["SANDBOX_PROCESSES"]),
        ),
        output_cap=output_cap(),
        read_only_paths=extra_paths,
        read_only_in_workspace=READ_ONLY_IN_WORKSPACE,
        allow_unsandboxed=config["ALLOW_UNSANDBOXED"],
    )
    result = PluginRun(
        None, stderr=run.stderr[-4000:], duration_ms=run.duration_ms, sandboxed=run.sandboxed
    )
    if run.status == "unavailable":
        result.problem, result.code = (
            f"plugins cannot run: {run.reason}. Nothing was run; plugin code never runs "
            "unsandboxed unless the operator sets OPENHIVE_ALLOW_UNSANDBOXED.",
            "SANDBOX_UNAVAILABLE",
        )
    elif run.status == "timeout":
        result.problem, result.code = (
            f"the plugin was stopped after {timeout:g} s (timeout); make run() finish sooner "
            "or do less per call",
            "TIMEOUT",
        )
    elif run.status == "output_limit" or run.truncated:
        result.problem, result.code = (
            f"the plugin's result is over {output_cap()} bytes; return less (write large data "
            "to a file in the workspace and return its path)",
            "OUTPUT_LIMIT",
        )
    else:
        result.envelope = _envelope(run.stdout)
        if result.envelope is None:
            result.problem, result.code = _no_envelope(run)
    return result


def _envelope(stdout: str) -> dict | None:
    try:
        value = json.loads(stdout)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and isinstance(value.get("ok"), bool) else None


def _no_envelope(run: sandbox.SandboxResult) -> tuple[str, str]:
    if run.exit_code not in (0, None):
        how = (
            f"was killed by signal {-run.exit_code}"
            if run.exit_code < 0
            else f"exited with status {run.exit_code}"
        )
        return (
            f"the plugin {how} before returning a result (a resource limit, or it ended the "
            "process itself)",
            "PLUGIN_CRASHED",
        )
    return (
        "the plugin's process produced no valid result (its output on the result channel was "
        "not the JSON the runner expects)",
        "PLUGIN_BAD_OUTPUT",
    )

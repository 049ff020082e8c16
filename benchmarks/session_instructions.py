"""Instructions a session makes the Python process execute, counted by valgrind (callgrind): the
scenario of session_step.py (one tool `add`, a zero-cost model making K tool calls), the bare
litellm loop beside the engine's modes.

    uv run python benchmarks/session_instructions.py [--steps 10] [--sessions 3]
    DATABASE_URL=postgres://... uv run python benchmarks/session_instructions.py

Why beside session_step.py: its wall-clock figures move by a tenth from run to run on a shared
VM, which hides a change of a few per cent; an instruction count repeats within ~1 % (what
varies is mostly how often psycopg polls its socket before an answer arrives). What it leaves
out is as telling: the time spent waiting on the database, the database server's own work,
and how fast the instructions run (cache misses). So a mode's instruction ratio is below its
wall-clock ratio; the difference is the waits and the memory traffic.

Valgrind slows the process ~50x, so what session_step.py's modes do on a timer happens at other
moments here: the cancel flag, the budgets and the scrubber are re-read on a timer, so those
timers are set long (they are each one query, made at most every 0.1-2 s in a real session),
and the garbage collector is off while counting. Needs valgrind (`apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import throwaway_django

MODES = ("bare", "chat", "task", "pull")
# Timers that would fire at other moments under valgrind's slowdown (see the docstring).
STEADY = {
    "OPENHIVE_CANCEL_FRESH_SECONDS": "100000",
    "OPENHIVE_CANCEL_POLL_SECONDS": "100000",
    "OPENHIVE_BUDGET_REFRESH_SECONDS": "100000",
    "OPENHIVE_STEP_WRITE_WINDOW_MS": "100000",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10, help="K, tool calls a session")
    parser.add_argument("--sessions", type=int, default=3, help="counted sessions per mode")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        _count(args.steps, args.sessions, Path(args.inner))
        return
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): nothing measured")
        return
    os.environ.update(STEADY)
    with throwaway_django("openhive-instr-") as (data, vendor):
        from django.db import connections
        from session_step import prepare

        prepare(data)  # migrated and set up here, at full speed
        connections.close_all()
        out = Path(tempfile.mkdtemp(prefix="openhive-callgrind-"))
        try:
            subprocess.run(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                 f"--callgrind-out-file={out / 'cg.out'}", sys.executable, __file__,
                 "--steps", str(args.steps), "--sessions", str(args.sessions),
                 "--inner", str(data)],
                check=True, capture_output=True, timeout=3600,
            )  # fmt: skip
            counts = _totals(out, args.sessions)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    base = counts["bare"]
    print(
        f"database: {vendor}; K = {args.steps}; instructions of the Python process a session "
        f"(callgrind; {args.sessions} sessions of each mode counted together)"
    )
    for mode in MODES:
        print(
            f"  {mode:>4}: {counts[mode] / 1e6:7.2f} M instructions a session"
            + ("" if mode == "bare" else f"; {counts[mode] / base:.2f}x bare")
        )


def _count(steps: int, sessions: int, data: Path) -> None:
    """Inside valgrind: warm every mode up, then count each mode's sessions apart."""
    import django

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    django.setup()
    import session_step as step

    from openhive.core import scrubbing

    team, schema = step.prepare(data)
    step.write_script(data, steps)
    scrubbing.CACHE_SECONDS = 1e9  # a session's start reloads it anyway
    for mode in MODES:
        for _ in range(2):
            step._run(mode, steps, team, schema)
    gc.collect()
    gc.freeze()
    gc.disable()
    pid = str(os.getpid())
    for mode in MODES:
        subprocess.run(["callgrind_control", "-z", pid], capture_output=True, check=True)
        subprocess.run(["callgrind_control", "-i", "on", pid], capture_output=True, check=True)
        for _ in range(sessions):
            step._run(mode, steps, team, schema)
        subprocess.run(["callgrind_control", "-i", "off", pid], capture_output=True, check=True)
        subprocess.run(["callgrind_control", "-d", mode, pid], capture_output=True, check=True)


def _totals(out: Path, sessions: int) -> dict[str, float]:
    """Instructions a session, by mode, from the dumps `_count` asked for."""
    counts: dict[str, float] = {}
    for dump in out.glob("cg.out.*"):
        mode, total = "", 0
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith("desc: Trigger: dump "):
                mode = line.rsplit(" ", 1)[1]
            elif line.startswith("totals:"):
                total = int(line.split()[1])
        if mode in MODES:
            counts[mode] = total / sessions
    return counts


if __name__ == "__main__":
    main()

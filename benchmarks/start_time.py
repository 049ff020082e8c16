"""How long a user waits: `manage.py` verbs, and `serve` until /api/v1/health answers.

    uv run python benchmarks/start_time.py [--runs 3]

Each figure is the median of `--runs` starts, in a throwaway data dir (SQLite), after one
warm-up start (the first start of a fresh clone migrates and writes bytecode; the goals are
for the starts after it). Baseline, same run: a bare `python -c pass` of the same interpreter.
Goals (issue 19): every verb <= 2 s; serve healthy <= 5 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANAGE = [sys.executable, str(ROOT / "manage.py")]
VERBS = (["check"], ["openhive", "status"], ["openhive", "--help"], ["openhive", "tool", "main"])


def timed(command: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=ROOT, capture_output=True, check=True, timeout=120)
    return time.perf_counter() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_until_healthy(env: dict) -> float:
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        [*MANAGE, "openhive", "serve", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = started + 120
        while time.perf_counter() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=1):
                    return time.perf_counter() - started
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("serve did not answer within 120 s")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="openhive-start-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "OPENHIVE_"))}
    env.update(OPENHIVE_DATA_DIR=str(data / "data"), OPENHIVE_RUN_DIR=str(data / "run"))
    subprocess.run([*MANAGE, "migrate", "-v", "0"], env=env, cwd=ROOT, check=True)

    bare = statistics.median(timed([sys.executable, "-c", "pass"], env) for _ in range(args.runs))
    print(f"baseline: python -c pass {bare:.2f} s")
    for verb in VERBS:
        timed([*MANAGE, *verb], env)  # warm-up
        took = statistics.median(timed([*MANAGE, *verb], env) for _ in range(args.runs))
        verdict = "met" if took <= 2 else "NOT MET"
        print(f"manage.py {' '.join(verb):<20} {took:5.2f} s (goal <= 2 s: {verdict})")
    serve_until_healthy(env)  # warm-up
    took = statistics.median(serve_until_healthy(env) for _ in range(args.runs))
    print(
        f"serve until /api/v1/health answers: {took:.2f} s (goal <= 5 s: "
        f"{'met' if took <= 5 else 'NOT MET'})"
    )


if __name__ == "__main__":
    main()

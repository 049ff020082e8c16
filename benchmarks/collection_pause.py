"""What pausing the garbage collector for a chat burst costs the event loop that asks for it,
against starting a timer thread for each pause (how the pause was bounded before), measured in
the same run.

    uv run python benchmarks/collection_pause.py [--rounds 200]

A burst's second message pauses automatic collection (`openhive.core.heap.pause_collections`,
called by `openhive.chat.admit`) while the admit thread is writing the first batch: a thread
running Python beside the caller. `Thread.start` returns only once the new thread has run, so
the caller waited for the GIL to go to the new thread and come back, while every ack of the
burst waited behind it. Both ways are timed here with such a busy thread beside them,
alternated pause by pause. No goal of its own: the ack goals are benchmarks/chat_sockets.py's.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openhive.core.heap import pause_collections, start_pause_keeper


def timer_per_pause(seconds: float) -> threading.Timer:
    """The old bound: collection off, and a timer thread of its own to turn it back on."""
    gc.disable()
    timer = threading.Timer(seconds, gc.enable)
    timer.daemon = True
    timer.start()
    return timer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    stop = threading.Event()

    def busy() -> None:  # Python running on another thread, as the admit thread's batch does
        while not stop.is_set():
            sum(range(1000))

    start_pause_keeper()  # as the web server does once it listens
    threading.Thread(target=busy, daemon=True).start()
    times: dict[str, list[float]] = {"timer thread per pause": [], "pause_collections": []}
    try:
        for _ in range(args.rounds):
            started = time.perf_counter()
            timer = timer_per_pause(1.0)
            times["timer thread per pause"].append(time.perf_counter() - started)
            timer.cancel()
            gc.enable()
            started = time.perf_counter()
            pause = pause_collections(1.0)
            times["pause_collections"].append(time.perf_counter() - started)
            pause.end()
            time.sleep(0.002)
    finally:
        stop.set()
    print(f"{args.rounds} pauses each, alternated, a thread running Python beside the caller:")
    for name, values in times.items():
        values.sort()
        print(
            f"  {name}: p50 {statistics.median(values) * 1000:.3f} ms, "
            f"p90 {values[int(len(values) * 0.9)] * 1000:.3f} ms, max {values[-1] * 1000:.3f} ms"
        )


if __name__ == "__main__":
    main()

"""A process's long-lived objects are out of the full collections' walk (openhive.core.heap):
a full collection in the web process walked ~390,000 of them for 280-350 ms per pass, and
every chat ack pending meanwhile waited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

A_PROCESS = """
import gc, json
import openhive.asgi
from openhive.engine import llm
seen = {"web_app_walked": any(o is openhive.asgi.application for o in gc.get_objects())}
litellm = llm.get_litellm()
seen["litellm_walked"] = any(o is litellm.completion for o in gc.get_objects())
seen["frozen"] = gc.get_freeze_count()

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle made after the freeze: only a collection frees it
del a, b
seen["new_cycle_collected"] = gc.collect() >= 2
print(json.dumps(seen))
"""


def test_the_web_app_and_litellm_are_not_walked_but_new_garbage_is_collected(openhive_dirs):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENHIVE_", "DATABASE_"))}
    env.update(
        OPENHIVE_DATA_DIR=str(openhive_dirs / "data"),
        OPENHIVE_RUN_DIR=str(openhive_dirs / "run"),
        DJANGO_SETTINGS_MODULE="openhive.settings",
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", A_PROCESS],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["web_app_walked"] is False
    assert seen["litellm_walked"] is False
    assert seen["frozen"] > 100_000
    assert seen["new_cycle_collected"] is True

"""Start-up without garbage collection (openhive.core.heap.quiet_start): the collector is off
while a process loads Django and the apps, and back on, with what was loaded frozen, once the
last app is ready, in every process that loads them."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps

from openhive.core import heap

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def gc_state_restored():
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    yield
    heap._quiet_start[0] = False
    if frozen == 0:
        gc.unfreeze()
    if enabled:
        gc.enable()


@pytest.mark.usefixtures("gc_state_restored")
def test_quiet_start_turns_collection_off_until_start_done_freezes_and_turns_it_back_on():
    gc.unfreeze()
    heap.quiet_start()
    assert gc.isenabled() is False
    heap.start_done()
    assert gc.isenabled() is True
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    heap.start_done()  # a second call changes nothing
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("gc_state_restored")
def test_start_done_leaves_a_process_that_did_not_start_quietly_as_it_was():
    gc.unfreeze()
    gc.disable()  # turned off by someone else (a chat burst's pause): not ours to turn on
    heap.start_done()
    assert gc.isenabled() is False
    assert gc.get_freeze_count() == 0


def test_the_app_that_ends_start_up_is_loaded_last():
    assert list(apps.get_app_configs())[-1].name == "openhive.started"


def test_a_manage_py_command_runs_with_collection_on_and_its_start_up_frozen(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "OPENHIVE_"))}
    env["OPENHIVE_DATA_DIR"] = str(tmp_path / "data")
    probe = "import gc; print(gc.isenabled(), gc.get_freeze_count() > 10000)"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split() == ["True", "True"]


@pytest.mark.usefixtures("gc_state_restored")
def test_a_big_import_runs_without_collection_and_what_it_loaded_is_frozen():
    gc.unfreeze()
    with heap.loading_long_lived():
        assert gc.isenabled() is False
        loaded = [object() for _ in range(3)]  # noqa: F841  (what the import keeps)
    assert gc.isenabled() is True
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("gc_state_restored")
def test_a_big_import_during_a_pause_leaves_collection_off_for_the_pause_to_end():
    pause = heap.pause_collections(30)
    try:
        with heap.loading_long_lived():
            pass
        assert gc.isenabled() is False
    finally:
        pause.end()
    assert gc.isenabled() is True

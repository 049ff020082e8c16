"""The sweep of leftover sandbox cgroups never removes the group of a live process: a run of
another worker may be between creating its group and putting its process in (seen when two
processes started sandboxes at once: the second's sweep broke the first's run)."""

from __future__ import annotations

import os
import subprocess

from openhive.core.cgroups import _sweep


def test_the_sweep_removes_groups_of_gone_processes_only(tmp_path):
    base = tmp_path / "cgroup"
    base.mkdir()
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    (base / f"run-{gone.pid}-1").mkdir()
    (base / f"run-{os.getpid()}-7").mkdir()
    (base / "run-garbage").mkdir()
    (base / "other").mkdir()
    _sweep(base)
    assert sorted(p.name for p in base.iterdir()) == ["other", f"run-{os.getpid()}-7"]

"""Where OpenHive keeps its files: admin config under the data dir, team workspaces under the
run dir. Read from settings at call time so tests can point them elsewhere."""

import functools
import os
from pathlib import Path

from django.conf import settings


def data_dir() -> Path:
    return Path(settings.DATA_DIR)


def config_dir() -> Path:
    return data_dir() / "config"


def admin_rules_dir() -> Path:
    return data_dir() / "rules"


def scripts_dir() -> Path:
    return data_dir() / "scripts"


def run_dir() -> Path:
    return Path(settings.RUN_DIR)


def teams_dir() -> Path:
    return run_dir() / "teams"


def team_dir(name: str) -> Path:
    return teams_dir() / name


def team_file(name: str, filename: str) -> str:
    """A file of `team_dir(name)` as a plain string: for checks made very often (a stat at
    every claim), where building the Path cost more than the check."""
    return os.path.join(str(settings.RUN_DIR), "teams", name, filename)


@functools.cache
def system_rules_dir() -> Path:
    # Shipped with the code: resolved once (resolving the path stats every component).
    return Path(__file__).resolve().parent.parent / "system_rules"

"""Where OpenHive keeps its files: admin config under the data dir, team workspaces under the
run dir. Read from settings at call time so tests can point them elsewhere."""

import functools
import os
from pathlib import Path

from django.conf import settings


@functools.lru_cache(maxsize=1024)
def _joined(root: str, *parts: str) -> Path:
    # Paths are immutable, and building one costs microseconds: every model call of a session
    # asks for a few (its budget file, its team's directory), so each is built once.
    return Path(root, *parts)


def data_dir() -> Path:
    return _joined(str(settings.DATA_DIR))


def config_dir() -> Path:
    return _joined(str(settings.DATA_DIR), "config")


def config_file(name: str) -> Path:
    return _joined(str(settings.DATA_DIR), "config", name)


def admin_rules_dir() -> Path:
    return _joined(str(settings.DATA_DIR), "rules")


def scripts_dir() -> Path:
    return _joined(str(settings.DATA_DIR), "scripts")


def run_dir() -> Path:
    return _joined(str(settings.RUN_DIR))


def teams_dir() -> Path:
    return _joined(str(settings.RUN_DIR), "teams")


def team_dir(name: str) -> Path:
    return _joined(str(settings.RUN_DIR), "teams", name)


def team_file(name: str, filename: str) -> str:
    """A file of `team_dir(name)` as a plain string: for checks made very often (a stat at
    every claim), where building the Path cost more than the check."""
    return os.path.join(str(settings.RUN_DIR), "teams", name, filename)


@functools.cache
def system_rules_dir() -> Path:
    # Shipped with the code: resolved once (resolving the path stats every component).
    return Path(__file__).resolve().parent.parent / "system_rules"

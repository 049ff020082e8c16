"""Fixtures of the queue tests: three working teams."""

from __future__ import annotations

import pytest

from openhive.org.services import team_spawn
from tasks.models import Task


@pytest.fixture
def teams(main_team):
    """ops, db and web under main, with no task of their bootstrap left in the queue."""
    made = [
        team_spawn(parent=main_team, name=name, scope_accepts=[name]).team
        for name in ("ops", "db", "web")
    ]
    Task.objects.all().delete()
    return made

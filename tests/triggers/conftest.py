from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from teams.models import Team
from tests.factories import TeamFactory
from triggers.models import TriggerConfig
from triggers.services import trigger_create, trigger_enable


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 11, 20, 8, 58, 0, tzinfo=UTC))


@pytest.fixture
def ops(main_team) -> Team:
    return TeamFactory(name="ops", parent=main_team)


@pytest.fixture
def make_trigger(ops) -> Callable[..., TriggerConfig]:
    def make(
        *, name: str = "nightly", type: str = "schedule", config: dict | None = None, **kw
    ) -> TriggerConfig:
        enable = kw.pop("enable", True)
        trigger = trigger_create(
            team=kw.pop("team", ops),
            name=name,
            type=type,
            config=config if config is not None else {"cron": "0 9 * * *"},
            task=kw.pop("task", "Check the servers."),
            **kw,
        )
        return trigger_enable(trigger=trigger) if enable else trigger

    return make

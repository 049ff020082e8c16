"""Budgets: limits on tokens and dollars per task, per team per day, per trigger window (a
team's `budgets:` in its config.yaml) and for the whole organisation per day
(`OPENHIVE_DATA_DIR/config/budgets.yaml`). Checked before every model call with an estimate
of that call: a call that would pass a limit is not made and the session stops with
`budget_exceeded`, saying which budget and how much was spent."""

from __future__ import annotations

import contextlib
import contextvars
import time as _clock
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import yaml
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openhive.core import paths
from openhive.core.errors import DomainError

from . import unflushed
from .selectors import spend_totals

KINDS = ("tokens", "usd")


class Budgets(BaseModel):
    """A team's `budgets:` (every key optional; none set means no limit)."""

    model_config = ConfigDict(extra="forbid")

    task_tokens: int | None = Field(default=None, ge=1)
    task_usd: float | None = Field(default=None, gt=0)
    daily_tokens: int | None = Field(default=None, ge=1)
    daily_usd: float | None = Field(default=None, gt=0)
    window_tokens: int | None = Field(default=None, ge=1)
    window_usd: float | None = Field(default=None, gt=0)

    def limit(self, scope: str, kind: str) -> float | None:
        return getattr(self, f"{scope}_{kind}")

    def any(self) -> bool:
        return any(v is not None for v in self.model_dump().values())


class OrgBudget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    daily_tokens: int | None = Field(default=None, ge=1)
    daily_usd: float | None = Field(default=None, gt=0)


# Shared (frozen): every model call asks, and most deployments have no budgets file.
NO_ORG_BUDGET = OrgBudget()


class BudgetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    org: OrgBudget = Field(default_factory=OrgBudget)


def budgets_file() -> Path:
    return paths.config_file("budgets.yaml")


_cache: dict[str, Any] = {"key": None, "parsed": None, "looked": None, "path": None}
# The file is looked at again at most this often (every model call asks for it).
LOOK_SECONDS = 1.0


def load_org_budget() -> OrgBudget:
    """The org-wide daily cap (re-read when the file changes; none when there is no file)."""
    path = budgets_file()
    clock = _monotonic()
    looked = _cache["looked"]
    if looked is not None and _cache["path"] == path and clock - looked < LOOK_SECONDS:
        return _cache["parsed"].org if _cache["key"] is not None else NO_ORG_BUDGET
    _cache.update(looked=clock, path=path)
    try:
        key = (path, path.stat().st_mtime_ns)
    except FileNotFoundError:
        _cache.update(key=None, parsed=None)
        return NO_ORG_BUDGET
    if _cache["key"] != key:
        try:
            parsed = BudgetsFile.model_validate(yaml.safe_load(path.read_text()) or {})
        except (yaml.YAMLError, ValidationError) as exc:
            raise DomainError(f"{path} is invalid: {exc}", code="config_error") from exc
        _cache.update(key=key, parsed=parsed)
    return _cache["parsed"].org


def forget_cached_files() -> None:
    """Read budgets.yaml afresh on the next call (tests that rewrite it)."""
    _cache.update(key=None, parsed=None, looked=None, path=None)


def day_start(now: datetime) -> datetime:
    """Midnight of `now`'s day in the deployment's zone (TZ), as an aware datetime."""
    try:
        zone = ZoneInfo(settings.OPENHIVE["TZ"] or "UTC")  # cached by zoneinfo
    except Exception:  # an unknown TZ is reported by the trigger clock; days are UTC then
        zone = ZoneInfo("UTC")
    local = timezone.localtime(now, zone)
    return datetime.combine(local.date(), time.min, tzinfo=zone)


@dataclass(frozen=True)
class TriggerWindow:
    """The watch window a trigger's task belongs to: its tasks since the window opened."""

    trigger_id: int
    opened_at: datetime


@dataclass(frozen=True)
class BudgetScope:
    team_id: int
    team_name: str
    session_id: int
    task_id: int | None = None
    window: TriggerWindow | None = None


class BudgetExceeded(Exception):
    def __init__(self, budget: str, message: str, spent: dict) -> None:
        super().__init__(message)
        self.budget, self.spent = budget, spent


@dataclass
class Estimate:
    tokens: int
    usd: Decimal


_suspended: contextvars.ContextVar[bool] = contextvars.ContextVar("budgets_off", default=False)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """No budget applies inside (a replay spends nothing: its replies are recorded)."""
    token = _suspended.set(True)
    try:
        yield
    finally:
        _suspended.reset(token)


class BudgetGuard:
    """Checks one session's next call against every limit that applies to it."""

    def __init__(self, team: Budgets | None, scope: BudgetScope) -> None:
        self.team = team or Budgets()
        self.scope = scope
        self._team_limited = self.team.any()
        # What other sessions spent, per scope, and when it was read: re-read every
        # BUDGET_REFRESH_SECONDS (and at midnight), so a step costs no query; this session's
        # own spend is added as it happens.
        self._others: dict[str, tuple[int, Decimal]] = {}
        self._read_at: float | None = None
        self._day: datetime | None = None
        self._scopes: tuple[Any, dict] | None = None
        self._today: tuple[datetime, datetime] | None = None  # (midnight, next midnight)

    def active(self) -> bool:
        """Whether any limit applies at all (if not, the call needs no estimate)."""
        if _suspended.get():
            return False
        org = load_org_budget()
        return self.team.any() or org.daily_tokens is not None or org.daily_usd is not None

    def scopes(self, now: datetime) -> dict[str, tuple[Q, dict[str, float | None], str]]:
        """name → (which sessions count, {kind: limit}, how to say it); made again when the
        day or the org cap changes."""
        org = load_org_budget()
        if not self._team_limited and org.daily_tokens is None and org.daily_usd is None:
            return {}  # no limit at all (most teams): no day to work out, no scope to make
        if self._today is None or not self._today[0] <= now < self._today[1]:
            start = day_start(now)
            self._today = (start, day_start(start + timedelta(hours=25)))
        today = self._today[0]
        key = (today, org)
        if self._scopes is None or self._scopes[0] != key:
            self._scopes = (key, self._make_scopes(today, org))
        return self._scopes[1]

    def _make_scopes(self, today: datetime, org: OrgBudget) -> dict:
        s, found = self.scope, {}
        limits = {k: self.team.limit("task", k) for k in KINDS}
        if any(v is not None for v in limits.values()):
            where = Q(task_id=s.task_id) if s.task_id else Q(pk=s.session_id)
            what = f"task #{s.task_id}" if s.task_id else f"session #{s.session_id}"
            found["task"] = (where, limits, f"the task budget of team {s.team_name} ({what})")
        limits = {k: self.team.limit("daily", k) for k in KINDS}
        if any(v is not None for v in limits.values()):
            found["daily"] = (
                Q(team_id=s.team_id, started_at__gte=today),
                limits,
                f"the daily budget of team {s.team_name} (since {today:%Y-%m-%d %H:%M %Z})",
            )
        limits = {k: self.team.limit("window", k) for k in KINDS}
        if s.window is not None and any(v is not None for v in limits.values()):
            found["window"] = (
                Q(
                    task__correlation_id__startswith=f"trigger:{s.window.trigger_id}:",
                    task__created_at__gte=s.window.opened_at,
                ),
                limits,
                f"the trigger-window budget of team {s.team_name} (trigger "
                f"#{s.window.trigger_id}, window opened {s.window.opened_at:%Y-%m-%d %H:%M} UTC)",
            )
        limits = {"tokens": org.daily_tokens, "usd": org.daily_usd}
        if any(v is not None for v in limits.values()):
            found["org"] = (
                Q(started_at__gte=today),
                limits,
                f"the organisation's daily cap (since {today:%Y-%m-%d %H:%M %Z}, "
                f"{budgets_file().name})",
            )
        return found

    def others(self, scopes: dict, now: datetime) -> dict[str, tuple[int, Decimal]]:
        """Spend of the other sessions in each scope, read at most every refresh interval."""
        clock = _monotonic()
        today = self._today[0] if self._today else day_start(now)
        stale = (
            self._read_at is None
            or clock - self._read_at >= settings.OPENHIVE["BUDGET_REFRESH_SECONDS"]
            or today != self._day
            or set(scopes) != set(self._others)
        )
        if stale:
            mine = Q(pk=self.scope.session_id)
            self._others = spend_totals(
                {name: where & ~mine for name, (where, _, _) in scopes.items()}
            )
            self._read_at, self._day = clock, today
        return self._others

    def unflushed(self, scopes: dict) -> dict[str, tuple[int, Decimal]]:
        """What other sessions of this process spent in their current step, which the
        database does not show yet (a parent's step while its subagent runs)."""
        totals = {name: (0, Decimal(0)) for name in scopes}
        s = self.scope
        for spend in unflushed.others(s.session_id):
            same_task = s.task_id is not None and spend.task_id == s.task_id
            counts = {
                "task": same_task,
                "window": same_task,
                "daily": spend.team_id == s.team_id,
                "org": True,
            }
            for name in scopes:
                if counts.get(name):
                    tokens, usd = totals[name]
                    totals[name] = (tokens + spend.tokens, usd + spend.usd)
        return totals

    def check(
        self,
        estimate: Estimate | Callable[[], Estimate],
        *,
        bound: Callable[[], Estimate] | None = None,
        own_tokens: int = 0,
        own_usd: Decimal = Decimal(0),
        now: datetime | None = None,
    ) -> dict:
        """Raise `BudgetExceeded` if the call would pass a limit; else the spend seen.
        `own_*` is what this session has spent so far (it counts in every scope). `bound`,
        when given, is a cheap estimate never below the exact one: while even it passes no
        limit, the exact estimate (tokenising the request) is not needed."""
        if _suspended.get():
            return {}
        now = now or timezone.now()
        scopes = self.scopes(now)
        if not scopes:
            return {}
        others = self.others(scopes, now)
        extra = self.unflushed(scopes)
        spent = {
            name: (
                others[name][0] + extra[name][0] + own_tokens,
                others[name][1] + extra[name][1] + own_usd,
            )
            for name in scopes
        }
        if bound is None or _passed(scopes, spent, bound()) is not None:
            exact = estimate() if callable(estimate) else estimate  # made only when needed
            passed = _passed(scopes, spent, exact)
            if passed is not None:
                name, kind, used, need, limit = passed
                tokens, usd = spent[name]
                raise BudgetExceeded(
                    f"{name}_{kind}",
                    _message(f"{name}_{kind}", scopes[name][2], kind, used, need, limit),
                    {"tokens": tokens, "usd": float(usd)},
                )
        return {name: {"tokens": t, "usd": float(u)} for name, (t, u) in spent.items()}


def _passed(scopes: dict, spent: dict, estimate: Estimate) -> tuple | None:
    """The first (scope, kind, used, need, limit) that the call would pass, or None."""
    for name, (_, limits, _) in scopes.items():
        tokens, usd = spent[name]
        for kind, limit in limits.items():
            if limit is None:
                continue
            used = tokens if kind == "tokens" else usd
            need = estimate.tokens if kind == "tokens" else estimate.usd
            if used + need > Decimal(str(limit)):
                return name, kind, used, need, limit
    return None


def _monotonic() -> float:
    return _clock.monotonic()


def _amount(kind: str, value: Any) -> str:
    if kind == "tokens":
        return f"{int(value):,} tokens"
    return f"${Decimal(str(value)):.4f}"


def _message(budget: str, label: str, kind: str, used: Any, need: Any, limit: Any) -> str:
    return (
        f"[Budget exceeded: {budget}, {label}: {_amount(kind, used)} spent of "
        f"{_amount(kind, limit)}; the next model call needed about {_amount(kind, need)} more, "
        "so it was not made. Raise the budget or wait for it to reset.]"
    )


def estimate_call(
    *,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    observed_usd_per_token: Decimal,
    price: Any = None,
) -> Estimate:
    """Tokens: the counted prompt plus the completion expected. Dollars: litellm's price for
    the model when it knows it, else what this session's calls cost per token so far."""
    tokens = prompt_tokens + completion_tokens
    if price is not None:
        try:
            prompt_cost, completion_cost = price(
                model=model,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
            return Estimate(tokens, Decimal(str(prompt_cost + completion_cost)))
        except Exception:  # not in litellm's price list: fall back to what we observed
            pass
    return Estimate(tokens, observed_usd_per_token * tokens)


def window_since(opened_at: str | None) -> datetime | None:
    if not opened_at:
        return None
    try:
        moment = datetime.fromisoformat(opened_at)
    except ValueError:
        return None
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=ZoneInfo("UTC"))


__all__ = [
    "BudgetExceeded",
    "BudgetGuard",
    "BudgetScope",
    "Budgets",
    "Estimate",
    "OrgBudget",
    "TriggerWindow",
    "day_start",
    "estimate_call",
    "load_org_budget",
    "suspended",
    "window_since",
]

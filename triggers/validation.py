"""One validation for every door (tool, REST, admin, the clock itself): a trigger's fields and
its per-type config are checked here, and a refused value names what to fix."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from openhive.core import paths, saferegex
from openhive.core.errors import DomainError
from teams.skills import load_skill
from teams.subagents import load_subagent

NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
TYPES = ("schedule", "message", "keyword", "window")
OVERLAP_POLICIES = ("skip-then-replace", "always-skip", "always-replace", "allow")
MISFIRE_POLICIES = ("skip", "run_once")
MIN_TICK_MS = 1000
# Leap days come at most eight years apart; a cron with no date in this span has none at all.
CRON_HORIZON_YEARS = 10
DEFAULT_TICK_MS = 30_000
DEFAULT_RATE_PER_MINUTE = 10
MAX_KEYWORDS = 100
MAX_KEYWORD_CHARS = 100

_KEYS = {
    "schedule": {"cron"},
    "message": {"pattern", "channel", "topic_id", "rate_per_minute"},
    "keyword": {"keywords", "regex", "channel", "topic_id", "rate_per_minute"},
    "window": {"watch_window", "tick_interval_ms", "max_ticks_per_window", "max_tokens_per_window"},
}


class InvalidTrigger(DomainError):
    code = "invalid_trigger"


def _fail(message: str) -> None:
    raise InvalidTrigger(message)


def validate_cron(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(f"{field} is required: a 5-field cron expression such as '0 9 * * 1-5'")
    cron = " ".join(value.split())
    if len(cron.split()) != 5 or not croniter.is_valid(cron):
        _fail(
            f"{field} {value!r} is not a valid 5-field cron expression "
            "(minute hour day-of-month month day-of-week, e.g. '*/15 9-17 * * 1-5')"
        )
    # Valid syntax can still name no real moment ('0 0 31 2 *', February 31st): such a trigger
    # would never fire, and the clock could not compute its next slot.
    try:
        croniter(
            cron, datetime(2000, 1, 1, tzinfo=UTC), max_years_between_matches=CRON_HORIZON_YEARS
        ).get_next(datetime)
    except (CroniterError, ValueError, OverflowError):
        _fail(
            f"{field} {value!r} never fires: no date matches it within {CRON_HORIZON_YEARS} "
            "years (check day-of-month against the month, e.g. February has no 30th or 31st)"
        )
    return cron


def validate_regex(value: Any, field: str) -> str:
    """Trigger patterns run on every chat message, so they run on RE2 (linear time) and are
    capped in length; what RE2 cannot run is refused here, at every door."""
    if not isinstance(value, str) or not value:
        _fail(f"{field} must be a non-empty regular expression")
    try:
        saferegex.check_pattern(value, ignore_case=True)
    except saferegex.UnsafePattern as exc:
        _fail(f"{field} {value[:100]!r} {exc}")
    return value


def _positive_int(config: dict, key: str, *, required: bool, default: int | None = None) -> None:
    if key not in config or config[key] is None:
        if required:
            _fail(f"window triggers need {key} (a positive whole number)")
        if default is not None:
            config[key] = default
        return
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _fail(f"{key} must be a positive whole number; got {value!r}")


def validate_config(type: str, config: Any) -> dict:
    """A normalised copy of `config` for `type`, or InvalidTrigger."""
    if type not in TYPES:
        _fail(f"type must be one of {', '.join(TYPES)}; got {type!r}")
    if not isinstance(config, dict):
        _fail("config must be an object")
    config = {k: v for k, v in config.items() if v is not None}
    unknown = sorted(set(config) - _KEYS[type])
    if unknown:
        _fail(
            f"unknown config key(s) for a {type} trigger: {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(_KEYS[type]))})"
        )
    if type == "schedule":
        config["cron"] = validate_cron(config.get("cron"), "cron")
    elif type == "window":
        config["watch_window"] = validate_cron(config.get("watch_window"), "watch_window")
        _positive_int(config, "tick_interval_ms", required=False, default=DEFAULT_TICK_MS)
        if config["tick_interval_ms"] < MIN_TICK_MS:
            _fail(f"tick_interval_ms must be at least {MIN_TICK_MS}")
        _positive_int(config, "max_ticks_per_window", required=True)
        _positive_int(config, "max_tokens_per_window", required=True)
    else:
        _validate_message_config(type, config)
    return config


def _validate_message_config(type: str, config: dict) -> None:
    if "channel" in config and not isinstance(config["channel"], str):
        _fail("channel must be a channel id (text)")
    if "topic_id" in config and (
        isinstance(config["topic_id"], bool) or not isinstance(config["topic_id"], int)
    ):
        _fail("topic_id must be a topic id (a whole number)")
    _positive_int(config, "rate_per_minute", required=False, default=DEFAULT_RATE_PER_MINUTE)
    if type == "message":
        if "pattern" in config:
            config["pattern"] = validate_regex(config["pattern"], "pattern")
        return
    has_words, has_regex = "keywords" in config, "regex" in config
    if has_words == has_regex:
        _fail("keyword triggers need exactly one of keywords (a list of words) or regex")
    if has_regex:
        config["regex"] = validate_regex(config["regex"], "regex")
        return
    words = config["keywords"]
    if (
        not isinstance(words, list)
        or not words
        or not all(isinstance(w, str) and w.strip() for w in words)
    ):
        _fail("keywords must be a non-empty list of non-empty words")
    if len(words) > MAX_KEYWORDS or any(len(w) > MAX_KEYWORD_CHARS for w in words):
        _fail(f"keywords: at most {MAX_KEYWORDS} words of at most {MAX_KEYWORD_CHARS} characters")
    config["keywords"] = [w.strip() for w in words]


def validate_timezone(name: str) -> str:
    if not name:
        return ""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        _fail(f"timezone {name!r} is unknown; use an IANA name such as 'Europe/Berlin' or 'UTC'")
    return name


def validate_fields(*, fields: dict) -> dict:
    """Check the non-config fields (those present in `fields`); returns them normalised."""
    out = dict(fields)
    if "name" in out and (
        not isinstance(out["name"], str)
        or not NAME_PATTERN.match(out["name"])
        or len(out["name"]) > 100
    ):
        _fail("trigger name must be a lowercase slug (a-z, 0-9, single dashes), 100 chars max")
    if "task" in out and (not isinstance(out["task"], str) or not out["task"].strip()):
        _fail("task must be a non-empty text: what the team should do when the trigger fires")
    if out.get("overlap_policy") is not None and out["overlap_policy"] not in OVERLAP_POLICIES:
        _fail(f"overlap_policy must be one of {', '.join(OVERLAP_POLICIES)}")
    if out.get("misfire_policy") is not None and out["misfire_policy"] not in MISFIRE_POLICIES:
        _fail(f"misfire_policy must be one of {', '.join(MISFIRE_POLICIES)}")
    if out.get("max_turns") is not None and not 1 <= out["max_turns"] <= 500:
        _fail("max_turns must be between 1 and 500")
    if out.get("failure_threshold") is not None and not 1 <= out["failure_threshold"] <= 100:
        _fail("failure_threshold must be between 1 and 100")
    if "timezone" in out:
        out["timezone"] = validate_timezone(out["timezone"] or "")
    return out


def validate_targeting(*, team_name: str, subagent: str, skill: str) -> None:
    """A named subagent must exist; a named skill must exist and load cleanly (its body is
    delivered to the run the trigger starts, the subagent's when one is named)."""
    if subagent:
        if not NAME_PATTERN.match(subagent):
            _fail("subagent must be a lowercase slug naming a file in the team's subagents/")
        folder = paths.team_dir(team_name) / "subagents"
        available = sorted(p.stem for p in folder.glob("*.md")) if folder.is_dir() else []
        if subagent not in available:
            listing = ", ".join(available) if available else "no subagents defined for this team"
            _fail(f'unknown subagent "{subagent}" for team "{team_name}" ({listing})')
        try:  # the run would fail on a file that does not load: say so now
            load_subagent(team_name, subagent)
        except DomainError as exc:
            _fail(exc.message)
    if skill:
        if not NAME_PATTERN.match(skill):
            _fail("skill must be a lowercase slug naming one of the team's skills/")
        try:
            load_skill(team_name, skill)
        except DomainError as exc:
            _fail(exc.message)

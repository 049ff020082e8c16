"""The trigger inputs every door shares: the tools, the REST API and the admin form declare a
trigger's fields once, here; the services validate their values (`triggers.validation`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

OverlapPolicy = Literal["skip-then-replace", "always-skip", "always-replace", "allow"]
MisfirePolicy = Literal["skip", "run_once"]
TriggerType = Literal["schedule", "message", "keyword", "window"]


class TriggerSettings(BaseModel):
    """The per-type config; set only the fields of the trigger's type."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = Field(None, description="schedule: 5-field cron, e.g. '0 9 * * 1-5'")
    pattern: str | None = Field(None, description="message: optional regex (case-insensitive)")
    keywords: list[str] | None = Field(None, description="keyword: words that fire it")
    regex: str | None = Field(None, description="keyword: a regex instead of a word list")
    channel: str | None = Field(None, description="message/keyword: only this channel id")
    topic_id: int | None = Field(None, description="message/keyword: only this topic")
    rate_per_minute: int | None = Field(None, description="message/keyword: cap (default 10)")
    watch_window: str | None = Field(None, description="window: cron of the open minutes")
    tick_interval_ms: int | None = Field(None, description="window: tick cadence (>= 1000)")
    max_ticks_per_window: int | None = Field(None, description="window: tick cap (required)")
    max_tokens_per_window: int | None = Field(None, description="window: token cap (required)")

    def as_config(self) -> dict:
        return self.model_dump(exclude_none=True)


class TriggerFields(BaseModel):
    """What a caller may set on a trigger besides its config (and change later with an
    update); the clock state is the engine's own. None means "not given"."""

    model_config = ConfigDict(extra="forbid")

    task: str | None = Field(None, min_length=1, description="What the team does when it fires")
    subagent: str | None = Field(None, description="Route straight to this subagent")
    skill: str | None = Field(None, description="A skill whose instructions go with the run")
    max_turns: int | None = Field(None, ge=1, le=500)
    failure_threshold: int | None = Field(None, ge=1, le=100)
    overlap_policy: OverlapPolicy | None = None
    timezone: str | None = Field(None, description="IANA name; default the server's TZ")
    misfire_policy: MisfirePolicy | None = None

    def changes(self) -> dict:
        """The trigger fields given (a subclass's own fields, such as the team, are left out)."""
        return {
            k: v
            for k, v in self.model_dump(include=set(TriggerFields.model_fields)).items()
            if v is not None
        }

    def options(self) -> dict:
        """The optional fields given, for creating a trigger (the task is passed on its own)."""
        return {k: v for k, v in self.changes().items() if k != "task"}


# The fields trigger_update accepts: the config and every TriggerFields field.
UPDATABLE = ("config", *TriggerFields.model_fields)

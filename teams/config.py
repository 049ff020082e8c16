"""A team's `config.yaml` in its workspace: tools, provider profile, limits."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import yaml
from django.conf import settings
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from openhive.core import paths
from openhive.core.errors import DomainError
from openhive.engine.budgets import Budgets

from .models import MAIN_TEAM


class WebConfig(BaseModel):
    """web_fetch settings of a team."""

    model_config = ConfigDict(extra="forbid")

    # Hosts the team may fetch: exact names or `*.example.com` (strict subdomains); empty = any
    # public host. The SSRF address rules apply either way.
    allowed_domains: list[str] = Field(default_factory=list)


class BrowserConfig(BaseModel):
    """The browser tools of a team (absent: the team is never offered them)."""

    model_config = ConfigDict(extra="forbid")

    # Hosts the browser may load anything from (pages, scripts, images, XHR, WebSockets):
    # exact names or `*.example.com`; empty = any public host. The SSRF address rules apply
    # either way.
    allowed_domains: list[str] = Field(default_factory=list)
    # The time limit of one browser action (a navigation, a click and what it starts).
    timeout_ms: int = Field(default=15_000, ge=500, le=120_000)


class RateLimitBucket(BaseModel):
    """A token bucket: `burst` requests at once, refilled at `rps` per second. web_fetch takes
    a token from the bucket its `rate_limit_key` names, and from every bucket whose `domain`
    matches the request's host, so a limit holds even when the model names no key."""

    model_config = ConfigDict(extra="forbid")

    rps: float = Field(gt=0, le=10_000)
    burst: float = Field(ge=1, le=100_000)
    domain: str | None = None


class McpServerConfig(BaseModel):
    """One MCP server: a stdio subprocess (`command`) or a streamable HTTP endpoint (`url`).
    `env` and `headers` values may hold `{{vault:key}}` references, resolved at start."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # Relative to the team's workspace, and must stay inside it (default: the workspace).
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=60, gt=0, le=600)
    idle_seconds: float = Field(default=300, ge=5, le=86_400)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (a stdio server) or url (an HTTP server)")
        if self.url and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd belong to a stdio server (command)")
        if self.command and self.headers:
            raise ValueError("headers belong to an HTTP server (url)")
        return self


class AskUserConfig(BaseModel):
    """How long a task waits for a person's answer (`ask_user`, an approval), and what happens
    then: the `default` answer is given (the task resumes), or without one the task fails."""

    model_config = ConfigDict(extra="forbid")

    timeout_seconds: int = Field(default=86_400, ge=1, le=90 * 86_400)
    default: str | None = Field(default=None, min_length=1, max_length=2000)


# A server name becomes part of tool names (`mcp__{server}__{tool}`, at most 64 characters).
McpServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,19}$")]


class TeamConfig(BaseModel):
    # A misspelt key (`allowed_tool:`) must not quietly leave a team without its setting.
    model_config = ConfigDict(extra="forbid")

    name: str
    parent: str | None = None
    description: str = ""
    # Deny by default: a config that lists no tools offers the model none.
    allowed_tools: list[str] = Field(default_factory=list)
    provider_profile: str = "default"
    # Absent from config.yaml: OPENHIVE_MAX_TURNS (default 50).
    max_turns: int = Field(default_factory=lambda: default_max_turns(), ge=1, le=500)
    max_concurrent_daily_ops: int = Field(default=5, ge=1, le=100)
    web: WebConfig = Field(default_factory=WebConfig)
    browser: BrowserConfig | None = None
    rate_limit_buckets: dict[str, RateLimitBucket] = Field(default_factory=dict)
    # Tokens and dollars per task, per day and per trigger window; none set = no limit.
    budgets: Budgets = Field(default_factory=Budgets)
    # MCP servers by the name their tools carry: a definition, or the name of a server the
    # operator defined in the data dir's config/mcp_servers.yaml.
    mcp_servers: dict[McpServerName, McpServerConfig | str] = Field(default_factory=dict)
    # Waiting for a person: the timeout of a question or an approval, and its default answer.
    ask_user: AskUserConfig = Field(default_factory=AskUserConfig)
    # Tools (globs, matched like allowed_tools) whose calls wait for an operator's approval.
    require_approval: list[str] = Field(default_factory=list)


def config_path(name: str) -> Path:
    return paths.team_dir(name) / "config.yaml"


def default_config(name: str, *, parent: str | None, description: str = "") -> TeamConfig:
    return TeamConfig(
        name=name,
        parent=parent,
        description=description,
        allowed_tools=["*"],
        # The main agent routes a whole conversation's work: it gets more room.
        max_turns=max(200, default_max_turns()) if name == MAIN_TEAM else default_max_turns(),
    )


def default_max_turns() -> int:
    return settings.OPENHIVE["DEFAULT_MAX_TURNS"]


_cache: dict[str, tuple[bytes, TeamConfig]] = {}
_cache_lock = threading.Lock()
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built in: 10x faster


def load_team_config(name: str) -> TeamConfig:
    """The team's config, a copy of the caller's own (free to change)."""
    return read_team_config(name).model_copy(deep=True)


def read_team_config(name: str) -> TeamConfig:
    """The team's config, parsed once per content of the file (every tool call and claim asks
    for it, and parsing YAML each time cost milliseconds; reading the bytes costs
    microseconds, and unlike a modification time they cannot miss a quick rewrite).

    The instance is shared with every other reader: only read it. A caller that changes its
    config takes `load_team_config`'s copy (the deep copy is what a session start would pay
    three times over for the readers that only look)."""
    try:
        raw = config_path(name).read_bytes()
    except OSError:
        return _load_team_config(name)
    with _cache_lock:
        cached = _cache.get(name)
    if cached is None or cached[0] != raw:
        cached = (raw, _load_team_config(name))
        with _cache_lock:
            _cache[name] = cached
    return cached[1]


def _load_team_config(name: str) -> TeamConfig:
    path = config_path(name)
    if not path.exists():
        if name == MAIN_TEAM:
            return default_config(MAIN_TEAM, parent=None, description="Main orchestrator")
        raise DomainError(f'team "{name}" has no config.yaml at {path}', code="config_error")
    try:
        data = yaml.load(path.read_text(), Loader=_Loader) or {}
        if not isinstance(data, dict):
            raise DomainError(
                f"config error in {path}: expected a mapping of settings, got "
                f"{type(data).__name__}",
                code="config_error",
            )
        return TeamConfig.model_validate({"name": name, **data})
    except ValidationError as exc:
        raise DomainError(
            f"config error in {path}: {explain_errors(exc, TeamConfig)}", code="config_error"
        ) from exc
    except yaml.YAMLError as exc:
        raise DomainError(f"config error in {path}: {exc}", code="config_error") from exc


def explain_errors(exc: ValidationError, model: type[BaseModel]) -> str:
    """One line per mistake, naming the key: what an operator fixes in the file."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        if error["type"] == "extra_forbidden":
            known = ", ".join(k for k in model.model_fields if k != "name")
            parts.append(f'unknown key "{where}" (known keys: {known})')
        else:
            parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "; ".join(parts)


def write_team_config(config: TeamConfig) -> Path:
    path = config_path(config.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config.model_dump(), sort_keys=False))
    return path


def team_config_problem(name: str) -> str | None:
    """Why the team's config.yaml cannot be used, without the server's paths (for doors that
    people outside the server read: the health check, the admin); None when it is fine."""
    try:
        load_team_config(name)
    except DomainError as exc:
        return exc.message.replace(str(config_path(name)), f"teams/{name}/config.yaml")
    return None

"""Which MCP servers a team has, and exactly how each is started: its definition from the team's
config.yaml (or the operator's `config/mcp_servers.yaml` it names), vault references resolved,
the environment whitelisted and the working directory kept inside the workspace."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openhive.core import paths
from openhive.core.errors import DomainError, NotFound
from teams.config import McpServerConfig, McpServerName, explain_errors, read_team_config
from vault.services import vault_read


class McpConfigError(DomainError):
    code = "mcp_config_error"


_VAULT_REF = re.compile(r"\{\{\s*vault:([A-Za-z0-9_.\-]{1,200})\s*\}\}")
# What a stdio server inherits from the worker: enough to find programs and behave as a
# normal process, never the worker's secrets (database URL, provider keys, vault key). The
# SDK adds its own short list (HOME, LOGNAME, PATH, SHELL, TERM, USER) under these anyway.
ENV_WHITELIST = (
    "PATH",
    "HOME",
    "LOGNAME",
    "USER",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
)


class OperatorServers(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: dict[McpServerName, McpServerConfig] = Field(default_factory=dict)


def operator_file() -> Path:
    return paths.config_file("mcp_servers.yaml")


_operator_cache: dict[Path, tuple[bytes, OperatorServers]] = {}
_operator_lock = threading.Lock()


def operator_servers() -> OperatorServers:
    """The operator's shared server definitions (re-read when the file changes)."""
    path = operator_file()
    try:
        raw = path.read_bytes()
    except OSError:
        return OperatorServers()
    with _operator_lock:
        cached = _operator_cache.get(path)
    if cached is not None and cached[0] == raw:
        return cached[1]
    try:
        parsed = OperatorServers.model_validate(yaml.safe_load(raw) or {})
    except ValidationError as exc:
        raise McpConfigError(
            f"config error in config/mcp_servers.yaml: {explain_errors(exc, OperatorServers)}"
        ) from None
    except yaml.YAMLError as exc:
        raise McpConfigError(f"config error in config/mcp_servers.yaml: {exc}") from None
    with _operator_lock:
        _operator_cache[path] = (raw, parsed)
    return parsed


def team_server_configs(team_name: str) -> dict[str, McpServerConfig]:
    """The team's servers by name, references to operator servers resolved. Only servers the
    team's config names: an operator definition alone gives no team its tools."""
    configured = read_team_config(team_name).mcp_servers
    if not configured:
        return {}
    shared: OperatorServers | None = None
    out: dict[str, McpServerConfig] = {}
    for name, value in configured.items():
        if isinstance(value, McpServerConfig):
            out[name] = value
            continue
        shared = shared or operator_servers()
        if value not in shared.servers:
            known = ", ".join(sorted(shared.servers)) or "none"
            raise McpConfigError(
                f'mcp_servers.{name}: no server "{value}" in config/mcp_servers.yaml '
                f"(defined there: {known})"
            )
        out[name] = shared.servers[value]
    return out


@dataclass(frozen=True)
class ServerPlan:
    """One server of one team, ready to start: nothing in it is looked up again."""

    team_id: int
    team_name: str
    name: str
    config: McpServerConfig
    env: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    # The vault values this plan carries: scrubbed from everything the server sends back.
    secrets: tuple[str, ...] = ()
    fingerprint: str = ""

    @property
    def transport(self) -> str:
        return "http" if self.config.url else "stdio"

    @property
    def key(self) -> tuple[int, str]:
        return (self.team_id, self.name)


PLAN_CACHE_SECONDS = 2.0
_plans: dict[tuple, tuple[float, ServerPlan]] = {}


def server_plan(team: object, name: str, config: McpServerConfig) -> ServerPlan:
    """Resolve a server definition for `team`: vault references, environment, cwd. Every call
    of a server tool asks for its plan; a resolved plan is reused for a couple of seconds (the
    scrubber's own window: a changed vault value is used, and restarts the server, as soon as
    the scrubber knows it)."""
    key = (team.pk, str(paths.team_dir(team.name)), name, config.model_dump_json())
    cached = _plans.get(key)
    now = time.monotonic()
    if cached is not None and now - cached[0] < PLAN_CACHE_SECONDS:
        return cached[1]
    plan = _resolve_plan(team, name, config)
    if len(_plans) > 1000:
        _plans.clear()
    _plans[key] = (now, plan)
    return plan


def _resolve_plan(team: object, name: str, config: McpServerConfig) -> ServerPlan:
    secrets: list[str] = []

    def resolve(value: str, where: str) -> str:
        def insert(match: re.Match[str]) -> str:
            entry = vault_read(team=team, key=match.group(1))
            if entry is None:
                raise NotFound(
                    f'mcp_servers.{name}.{where}: vault key "{match.group(1)}" not found '
                    "(vault_list shows the team's keys)"
                )
            secrets.append(entry.value)
            return entry.value

        resolved = _VAULT_REF.sub(insert, value)
        if "\x00" in resolved or (where.startswith("headers") and re.search(r"[\r\n]", resolved)):
            raise McpConfigError(f"mcp_servers.{name}.{where} holds a forbidden character")
        return resolved

    env: dict[str, str] = {}
    headers: dict[str, str] = {}
    cwd: str | None = None
    if config.command:
        env = {key: os.environ[key] for key in ENV_WHITELIST if key in os.environ}
        env.update({k: resolve(v, f"env.{k}") for k, v in config.env.items()})
        cwd = str(_workspace_cwd(team.name, name, config.cwd))
    else:
        headers = {k: resolve(v, f"headers.{k}") for k, v in config.headers.items()}
    definition = {
        "team": team.name,
        "config": config.model_dump(),
        "cwd": cwd,
        # A changed vault value restarts the server; only a digest of it is kept.
        "secrets": hashlib.sha256("\x00".join(secrets).encode()).hexdigest(),
    }
    fingerprint = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()
    return ServerPlan(
        team_id=team.pk,
        team_name=team.name,
        name=name,
        config=config,
        env=env,
        headers=headers,
        cwd=cwd,
        secrets=tuple(secrets),
        fingerprint=fingerprint,
    )


def _workspace_cwd(team_name: str, server: str, cwd: str | None) -> Path:
    root = paths.team_dir(team_name).resolve()
    if not cwd:
        return root
    target = (root / cwd).resolve()
    if not target.is_relative_to(root):
        raise McpConfigError(
            f"mcp_servers.{server}.cwd {cwd!r} is outside the team's workspace; give a folder "
            "inside it (relative to the workspace)"
        )
    if not target.is_dir():
        raise McpConfigError(f"mcp_servers.{server}.cwd {cwd!r} is not a folder in the workspace")
    return target


def mcp_config_problems(team_names: list[str]) -> list[str]:
    """Why config/mcp_servers.yaml, or a team's reference into it, cannot be used (for the
    health check, `status` and the admin). A team config that does not parse at all is
    reported by the teams app already."""
    try:
        operator_servers()
    except McpConfigError as exc:
        return [exc.message]
    problems = []
    for name in team_names:
        try:
            team_server_configs(name)
        except McpConfigError as exc:
            problems.append(f'team "{name}": {exc.message}')
        except DomainError:
            continue
    return problems

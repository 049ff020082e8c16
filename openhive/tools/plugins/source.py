"""A team's active plugins as tools: `plugin__{tool_name}`, offered through the registry's
run-time source (the team's allowlist decides, e.g. `plugin__*`), called through `call_tool`
like any tool (so every call leaves an audit row), and run in the sandbox. Every result, good
or bad, names the SHA-256 of the code that ran, so the audit row ties the call to the code."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import Any

from openhive.core.compiled import CompiledQuery
from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.registry import ToolSpec
from openhive.core.scrubbing import get_scrubber

from ..models import Plugin
from .interface import argument_problems, offered_schema
from .runner import run_in_sandbox
from .selectors import plugin_live, plugins_active
from .services import read_verified, team_workspace

logger = logging.getLogger(__name__)
PREFIX = "plugin__"


# Read at every session of a team whose allowlist may match a plugin (the main agent's chat
# turns among them): compiled once, not at each session.
_ACTIVE = CompiledQuery(lambda team_id: plugins_active(team_id=team_id))


def plugin_tool_specs(team: Any) -> Iterable[ToolSpec]:
    """The tool source registered with the registry: one spec per active plugin of `team`."""
    if team.pk is None:
        return []
    return [_spec(plugin, team.name) for plugin in _ACTIVE.rows(Plugin, team_id=team.pk)]


def _spec(plugin: Plugin, team_name: str) -> ToolSpec:
    return ToolSpec(
        name=plugin.offered_name,
        description=f"{plugin.description} (plugin of team {team_name}, runs in a sandbox)",
        args=None,
        ops="daily",
        func=partial(call_plugin, plugin.tool_name),
        teams=frozenset({team_name}),
        parameters=offered_schema(plugin.parameters),
    )


def call_plugin(tool_name: str, ctx: ToolContext, args: dict) -> dict:
    # Read again at call time: the offer was made when the session began, and the operator
    # may have deprecated the plugin (or the team replaced it) since.
    plugin = plugin_live(team_id=ctx.team.pk, tool_name=tool_name)
    if plugin is None or plugin.status != Plugin.Status.ACTIVE:
        state = "not registered" if plugin is None else plugin.status.replace("_", " ")
        raise DomainError(
            f"{PREFIX}{tool_name} is {state} for team {ctx.team.name}; it was not run",
            code="plugin_unavailable",
        )
    identity = {"plugin": plugin.offered_name, "version": plugin.version}
    identity["code_sha256"] = plugin.source_hash
    try:
        workspace = team_workspace(ctx.team)
        source = read_verified(plugin)
    except DomainError as exc:
        return _failure(exc.message, exc.code.upper(), identity)
    problems = argument_problems(plugin.parameters, args)
    if problems:
        return _failure(
            "invalid arguments: " + "; ".join(problems) + " (see the tool's parameters)",
            "INVALID_ARGUMENTS",
            identity,
        )
    scrubber = get_scrubber()
    texts = list(_strings(args))
    if any(secret in text for secret in scrubber.secrets for text in texts):
        # A plugin has no network: a secret handed to it can only land in a file or a result.
        return _failure(
            "the arguments contain a secret value from the vault; plugins have no network and "
            "must not be given secrets",
            "SECRET_DETECTED",
            identity,
        )
    run = run_in_sandbox(
        mode="run",
        name=tool_name,
        source=source,
        workspace=workspace.root,
        args=args,
    )
    identity["duration_ms"] = run.duration_ms
    identity["sandboxed"] = run.sandboxed
    if not run.sandboxed:
        logger.warning("plugin %s of %s ran WITHOUT a sandbox", tool_name, ctx.team.name)
    envelope = run.envelope
    if envelope is None:
        return _failure(run.problem, run.code, identity, stderr=scrubber.text(run.stderr))
    if not envelope["ok"]:
        kind = envelope.get("kind")
        line = envelope.get("line")
        where = f" (plugins/{tool_name}.py line {line})" if line else ""
        message = scrubber.text(str(envelope.get("error", "")))
        if kind == "result":
            return _failure(message, "PLUGIN_BAD_RESULT", identity)
        return _failure(
            f"the plugin raised {message}{where}",
            "PLUGIN_ERROR",
            identity,
            stderr=scrubber.text(run.stderr),
        )
    result = {"success": True, "result": scrubber.data(envelope.get("result")), **identity}
    if run.stderr.strip():
        result["stderr"] = scrubber.text(run.stderr[-2000:])
    return result


def _failure(error: str, code: str, identity: dict, *, stderr: str = "") -> dict:
    result = {"success": False, "error": error, "code": code, **identity}
    if stderr.strip():
        result["stderr"] = stderr[-2000:]
    return result


def _strings(value: Any) -> Iterable[str]:
    """Every string in JSON-like arguments, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)

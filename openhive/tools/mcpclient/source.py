"""MCP server tools as team tools: `mcp__{server}__{tool}`, offered only to the team whose
config names the server and within its allowlist, with the server's schema made portable.
A call goes through the tool door like any other (audit, timeout), and its result is scrubbed
of every known secret and of the values this server's definition carries."""

from __future__ import annotations

import logging
import re
from typing import Any

from openhive.core.errors import DomainError
from openhive.core.registry import ToolSpec, portable_json_schema
from openhive.core.scrubbing import get_scrubber
from teams.config import read_team_config

from ..selectors import mcp_status
from ..services import mcpstatus_record
from .runtime import McpManager, get_manager
from .servers import ServerPlan, server_plan, team_server_configs

logger = logging.getLogger("openhive.tools.mcp")

MAX_TOOL_NAME = 64
MAX_RESULT_CHARS = 100_000
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def manager() -> McpManager:
    return get_manager(_record_status)


def _record_status(plan: ServerPlan, state: str, tools: list[dict] | None, error: str | None):
    scrubber = get_scrubber().with_extra(plan.secrets)
    try:
        mcpstatus_record(
            team_id=plan.team_id,
            server=plan.name,
            transport=plan.transport,
            state=state,
            fingerprint=plan.fingerprint,
            tools=scrubber.data(tools) if tools is not None else None,
            error=scrubber.text(error) if error is not None else None,
        )
    except Exception:  # the admin's view must never break a tool call
        logger.exception("could not record the status of MCP server %s", plan.name)


def tool_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{_UNSAFE.sub('_', tool)}"[:MAX_TOOL_NAME]


def _may_allow(server: str, patterns: list[str]) -> bool:
    """Could any allowlist pattern admit a tool of `server`? (If none can, the server is not
    started just to list tools nobody may be offered.) Compares the literal head of each
    pattern with the tools' common prefix: never says no when a pattern could match."""
    prefix = f"mcp__{server}__"
    for pattern in patterns:
        head = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        if head.startswith(prefix) or prefix.startswith(head):
            return True
    return False


def mcp_tool_source(team: Any) -> list[ToolSpec]:
    """The tools of the team's MCP servers. A server already running here answers from its
    session; otherwise the list cached in its status row (same definition) is used, so
    starting a session does not start every server; only a server never listed is started."""
    if getattr(team, "pk", None) is None:
        return []
    try:
        configs = team_server_configs(team.name)
        patterns = read_team_config(team.name).allowed_tools if configs else []
    except DomainError as exc:
        logger.warning("MCP servers of team %s: %s", team.name, exc.message)
        return []
    specs: list[ToolSpec] = []
    for server, config in configs.items():
        if not _may_allow(server, patterns):
            continue
        try:
            plan = server_plan(team, server, config)
            rows = _listed_tools(plan)
        except DomainError as exc:
            logger.warning("MCP server %s of team %s: %s", server, team.name, exc.message)
            continue
        except Exception:  # whatever a server does, the session starts without its tools
            logger.exception(
                "MCP server %s of team %s: listing its tools failed", server, team.name
            )
            continue
        specs.extend(_spec(server, row) for row in rows)
    return specs


def _listed_tools(plan: ServerPlan) -> list[dict]:
    live = manager().tools(plan, start=False)
    if live is None:
        status = mcp_status(team_id=plan.team_id, server=plan.name)
        if status is not None and status.fingerprint == plan.fingerprint and status.tools:
            return status.tools
        live = manager().tools(plan)
    rows = [
        {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
        for t in live or []
    ]
    # Descriptions and schemas go into the prompt: no secret of this server's goes with them.
    return get_scrubber().with_extra(plan.secrets).data(rows)


def _spec(server: str, row: dict) -> ToolSpec:
    original = row["name"]
    name = tool_name(server, original)

    def call(ctx: Any, args: dict) -> dict:
        return call_server_tool(ctx, server, original, args)

    description = (row.get("description") or f"{original} (MCP server {server})")[:2000]
    return ToolSpec(
        name=name,
        description=f"[MCP {server}] {description}",
        args=None,
        ops="daily",
        func=call,
        parameters=portable_json_schema(row.get("input_schema") or {}),
    )


def call_server_tool(ctx: Any, server: str, tool: str, args: dict) -> dict:
    """Call `tool` of the caller's own server `server` (the definition is read again, so a
    server removed from the config is not reachable through a session that offered it)."""
    configs = team_server_configs(ctx.team.name)
    if server not in configs:
        raise DomainError(
            f'MCP server "{server}" is not configured for team "{ctx.team.name}" any more',
            code="mcp_server_unknown",
        )
    plan = server_plan(ctx.team, server, configs[server])
    scrubber = get_scrubber().with_extra(plan.secrets)
    try:
        result = manager().call(plan, tool, args)
    except DomainError as exc:
        raise type(exc)(scrubber.text(exc.message), code=exc.code) from None
    out = _render(result)
    if result.is_error:
        raise DomainError(
            scrubber.text(f'MCP tool {tool} of server "{server}" failed: {out["text"][:4000]}'),
            code="mcp_tool_error",
        )
    return scrubber.data(out)


def _render(result: Any) -> dict:
    """The result as the model reads it: the text parts joined, structured content as is,
    other parts (images, audio, resources) described rather than inlined."""
    texts: list[str] = []
    other: list[dict] = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            texts.append(item.text)
        elif kind == "resource" and getattr(item.resource, "text", None) is not None:
            texts.append(item.resource.text)
        elif kind in ("image", "audio"):
            other.append({"type": kind, "mime_type": item.mime_type, "bytes": len(item.data)})
        elif kind == "resource_link":
            other.append({"type": kind, "uri": str(item.uri), "name": item.name})
        else:
            other.append({"type": kind or "unknown"})
    text = "\n".join(texts)
    out: dict[str, Any] = {"text": text[:MAX_RESULT_CHARS]}
    if len(text) > MAX_RESULT_CHARS:
        out["truncated"] = True
    if result.structured_content is not None:
        out["structured"] = result.structured_content
    if other:
        out["other_content"] = other
    return out

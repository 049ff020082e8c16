"""`register_plugin_tool`: a team writes a tool for itself. An org-op (it changes what the
team's sessions are offered), so it runs under the team's org-op mutex."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.registry import tool
from tasks.services import caller_org_op

from .services import MAX_SOURCE_CHARS, PluginRefused, plugin_register


class RegisterPluginArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool_name: str = Field(
        min_length=1, max_length=56, description="snake_case name; offered as plugin__<name>"
    )
    source_code: str = Field(
        min_length=1,
        max_length=MAX_SOURCE_CHARS,
        description=(
            "One Python module (standard library only) defining DESCRIPTION (str), PARAMETERS "
            "(a JSON Schema object for the arguments) and def run(args) returning a "
            "JSON-serialisable value"
        ),
    )


@tool(
    name="register_plugin_tool",
    description=(
        "Register a tool of your own: a Python module (stdlib only) with DESCRIPTION, "
        "PARAMETERS (JSON Schema) and run(args). It is checked (no eval/exec, subprocesses, "
        "network, environment, secrets or paths outside your workspace), then offered to your "
        "sessions as plugin__<tool_name> and run in a sandbox with no network. Registering an "
        "existing name replaces it."
    ),
    args=RegisterPluginArgs,
    ops="org",
)
def register_plugin_tool(ctx: ToolContext, args: RegisterPluginArgs) -> dict:
    try:
        with caller_org_op(ctx, "register_plugin_tool"):
            plugin = plugin_register(
                team=ctx.team,
                tool_name=args.tool_name,
                source_code=args.source_code,
                registered_by=ctx.caller,
            )
    except PluginRefused as exc:
        return {
            "success": False,
            "error": exc.message,
            "code": exc.code,
            "line": exc.line,
            "findings": [finding.as_dict() for finding in exc.findings],
        }
    return {
        "tool": plugin.offered_name,
        "version": plugin.version,
        "code_sha256": plugin.source_hash,
        "path": plugin.source_path,
        "note": (
            f"Offered to your sessions as {plugin.offered_name} where your allowed_tools admit "
            "it (e.g. plugin__*); it runs with the standard library only, in a sandbox with no "
            "network, your workspace as its only writable folder, and a timeout."
        ),
    }

"""The workspace and reach-tool guidance in a team's prompt: which of these tools this session
has, and where its workspace is."""

from __future__ import annotations

from openhive.core import paths
from openhive.core.prompt_sections import PromptContext, prompt_section
from teams.prompt import TOOL_NAMES

FILE_TOOLS = ("read_file", "write_file", "edit_file", "glob", "grep")
GUIDANCE = {
    "read_file": "`read_file` shows a file with line numbers (offset/limit for long ones)",
    "write_file": "`write_file` creates or replaces a whole file",
    "edit_file": "`edit_file` replaces an exact, unique piece of text",
    "glob": "`glob` finds files by pattern, newest first",
    "grep": "`grep` searches file contents with a regular expression",
    "bash": "`bash` runs a command in a sandbox: your workspace is its working folder and the "
    "only writable one; it has no network",
    "web_fetch": "`web_fetch` gets a public URL (private and local addresses are refused; "
    "HTML comes back as text); a header value `{{vault:key}}` sends a secret without showing "
    "it to you",
    "register_plugin_tool": "`register_plugin_tool` adds a tool of your own: one Python module "
    "(standard library only) with DESCRIPTION, PARAMETERS (a JSON Schema) and `run(args)`; it "
    "is offered as `plugin__<name>` from your next session and runs in the sandbox, with no "
    "network and no secrets",
}


@prompt_section("workspace-tools", order=30)
def workspace_tools_section(ctx: PromptContext) -> str:
    offered = set(ctx.data.get(TOOL_NAMES) or ())
    names = [name for name in GUIDANCE if name in offered]
    if not names:
        return ""
    lines = ["## Your workspace and tools", ""]
    lines.append(
        f"Your workspace is `{paths.team_dir(ctx.team.name)}`. Relative paths resolve there, "
        "and it is the only place your tools can read or write: paths that lead outside it are "
        "refused (PATH_OUTSIDE_BOUNDARY). You may write your own `skills/`, `subagents/`, "
        "`team-rules/`, `org-rules/` and work files, but not your `config.yaml` "
        "(GOVERNANCE_BLOCKED)."
        if any(name in offered for name in (*FILE_TOOLS, "bash"))
        else "You have no file tools in this session."
    )
    lines.append("")
    lines += [f"- {GUIDANCE[name]}." for name in names]
    lines.append("")
    lines.append(
        "Never put secret values in files or commands: they are replaced by [REDACTED]. A "
        "refused call says why (its `code`); change the call rather than repeating it."
    )
    return "\n".join(lines)

"""A team's system prompt, built from the rule cascade: system rules → admin org rules → ancestors'
org-rules (root → parent) → own org-rules → own team-rules. The first two tiers form a
byte-stable static prefix (cacheable); the rest is the per-team dynamic suffix."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openhive.core import paths
from openhive.core.prompt_sections import PromptContext, prompt_section, registered_sections
from openhive.core.scrubbing import scrub

from .models import MAIN_TEAM, Team, TeamMessage
from .selectors import team_ancestors as ancestors
from .subagents import RUN_SUBAGENT, Subagent


@dataclass(frozen=True)
class SystemPrompt:
    static_prefix: str
    dynamic_suffix: str

    def messages(self, *, cache_hint: bool) -> list[dict]:
        static: object = self.static_prefix
        if cache_hint:
            static = [
                {"type": "text", "text": self.static_prefix, "cache_control": {"type": "ephemeral"}}
            ]
        return [
            {"role": "system", "content": static},
            {"role": "system", "content": self.dynamic_suffix},
        ]


def load_rules(directory: Path) -> list[str]:
    """Top-level markdown files of a directory, in file-name order; none if it is missing."""
    if not directory.is_dir():
        return []
    return [p.read_text().strip() for p in sorted(directory.glob("*.md")) if p.is_file()]


# The system rules ship with the code, so they are read once per process (every session start
# read and globbed them again); the admin's and the teams' rules are read afresh each time.
@functools.cache
def _system_rules() -> list[str]:
    return load_rules(paths.system_rules_dir())


@functools.cache
def _system_role(filename: str) -> str:
    return (paths.system_rules_dir() / "roles" / filename).read_text().strip()


def _section(header: str, rules: list[str]) -> str:
    if not rules:
        return ""
    return f"--- {header} ---\n\n" + "\n\n".join(rules)


def build_system_prompt(
    team: Team,
    *,
    topic_name: str | None = None,
    data: dict[str, Any] | None = None,
    subagent: Subagent | None = None,
    ancestors_chain: list[Team] | None = None,
) -> SystemPrompt:
    """Pure: reads rules and the data the session start loaded (`data`, by section name;
    `ancestors_chain`, the team's ancestors, if it read them). A subagent's session gets its
    identity (the file's body) in place of the orchestrator's role, then the same cascade and
    sections."""
    static = "\n\n".join(
        part
        for part in (
            _section("System Rules", _system_rules()),
            _section("Organization Rules", load_rules(paths.admin_rules_dir())),
        )
        if part
    )
    role = "main.md" if team.name == MAIN_TEAM else "team.md"
    identity = f"You are the team `{team.name}`."
    described = f" Description: {team.description}" if team.description else ""
    if subagent is not None:
        role = "subagent.md"
        identity = f"You are `{subagent.name}`, a subagent of the team `{team.name}`."
        described = f" The team's description: {team.description}" if team.description else ""
    dynamic_parts = [
        identity + described,
        _system_role(role),
    ]
    if subagent is not None:
        dynamic_parts.append(_section(f"Subagent: {subagent.name}", [subagent.body]))
    chain = ancestors(team) if ancestors_chain is None else ancestors_chain
    for node in [*chain, team]:
        dynamic_parts.append(
            _section(f"Org Rules: {node.name}", load_rules(paths.team_dir(node.name) / "org-rules"))
        )
    dynamic_parts.append(
        _section(f"Team Rules: {team.name}", load_rules(paths.team_dir(team.name) / "team-rules"))
    )
    context = PromptContext(team=team, data=data or {})
    dynamic_parts.extend(section.func(context) for section in registered_sections())
    if topic_name:
        dynamic_parts.append(
            f'## Current topic\nYou are answering within the topic "{topic_name}".'
        )
    return SystemPrompt(static, "\n\n".join(p for p in dynamic_parts if p))


INBOX = "team-inbox"
# The names of the tools this session is offered (prompt sections describe only those).
TOOL_NAMES = "tool-names"
# The subagents this session may run (loaded at its start), and the one it runs as, if any.
SUBAGENTS = "subagents"
ACTIVE_SUBAGENT = "active-subagent"


@prompt_section(INBOX, order=10)
def inbox_section(ctx: PromptContext) -> str:
    """Messages from other teams that this session's start took from the inbox."""
    messages: list[TeamMessage] = ctx.data.get(INBOX) or []
    if not messages:
        return ""
    lines = ["## Messages from other teams", ""]
    for m in messages:
        relation = "child" if m.sender.parent_id == ctx.team.pk else "parent"
        label = "ESCALATION" if m.kind == TeamMessage.Kind.ESCALATION else "message"
        reason = f" (reason: {m.reason})" if m.reason else ""
        stamp = m.created_at.strftime("%Y-%m-%d %H:%M UTC")
        content = scrub(m.content)
        lines.append(
            f"- [{label} from {relation} team `{m.sender.name}`, {stamp}]{reason} {content}"
        )
    return "\n".join(lines)


@prompt_section(SUBAGENTS, order=45)
def subagents_section(ctx: PromptContext) -> str:
    """The subagents this session may hand work to: only where `run_subagent` is offered (never
    the main agent, never at the depth cap)."""
    if RUN_SUBAGENT not in (ctx.data.get(TOOL_NAMES) or ()):
        return ""
    found: list[Subagent] = ctx.data.get(SUBAGENTS) or []
    if not found:
        return ""
    lines = [
        "## Your subagents",
        "",
        f"Hand each piece of work to the subagent that fits it with `{RUN_SUBAGENT}(name, task)`."
        " It works in a session of its own and sees only the task text you give it, so make "
        "that text self-contained; you get back its final answer.",
        "",
    ]
    lines += [f"- `{s.name}` — {s.description}" for s in found]
    return "\n".join(lines)


# The skills index is a section of this prompt too; it lives beside the skill loader.
from . import skills as _skills  # noqa: E402, F401

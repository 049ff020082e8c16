"""The system prompt, built from the rule cascade: system rules → admin org rules → ancestors'
org-rules (root → parent) → own org-rules → own team-rules. The first two tiers form a
byte-stable static prefix (cacheable); the rest is the per-team dynamic suffix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from openhive import paths
from teams.models import MAIN_TEAM, Team

PromptSection = Callable[[Team], str]
_SECTIONS: dict[str, PromptSection] = {}


def prompt_section(name: str):
    """Register `func(team) -> markdown` as a section of every team's dynamic prompt suffix,
    after the rules (memory, inbox, ...). Registration order is prompt order."""

    def decorate(func: PromptSection) -> PromptSection:
        _SECTIONS[name] = func
        return func

    return decorate


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


def _section(header: str, rules: list[str]) -> str:
    if not rules:
        return ""
    return f"--- {header} ---\n\n" + "\n\n".join(rules)


def ancestors(team: Team) -> list[Team]:
    """Root first, parent last."""
    chain: list[Team] = []
    node = team.parent
    seen = {team.pk}
    while node is not None and node.pk not in seen:
        chain.append(node)
        seen.add(node.pk)
        node = node.parent
    return list(reversed(chain))


def build_system_prompt(team: Team, *, topic_name: str | None = None) -> SystemPrompt:
    static = "\n\n".join(
        part
        for part in (
            _section("System Rules", load_rules(paths.system_rules_dir())),
            _section("Organization Rules", load_rules(paths.admin_rules_dir())),
        )
        if part
    )
    role = "main.md" if team.name == MAIN_TEAM else "team.md"
    dynamic_parts = [
        f"You are the team `{team.name}`."
        + (f" Description: {team.description}" if team.description else ""),
        (paths.system_rules_dir() / "roles" / role).read_text().strip(),
    ]
    for node in [*ancestors(team), team]:
        dynamic_parts.append(
            _section(f"Org Rules: {node.name}", load_rules(paths.team_dir(node.name) / "org-rules"))
        )
    dynamic_parts.append(
        _section(f"Team Rules: {team.name}", load_rules(paths.team_dir(team.name) / "team-rules"))
    )
    dynamic_parts.extend(section(team) for section in _SECTIONS.values())
    if topic_name:
        dynamic_parts.append(
            f'## Current topic\nYou are answering within the topic "{topic_name}".'
        )
    return SystemPrompt(static, "\n\n".join(p for p in dynamic_parts if p))

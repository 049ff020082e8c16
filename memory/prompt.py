"""The memory section of every team's prompt (registered on the prompt builder's hook)."""

from __future__ import annotations

from openhive.engine.prompt import prompt_section
from teams.models import Team
from vault.scrubbing import scrub

from .selectors import memory_injectable


def render_memory(team: Team) -> str:
    entries = memory_injectable(team=team)
    if not entries:
        return ""
    lines = ["## Memory", "What this team saved to remember (search for reference/historical):"]
    current_type = None
    for entry in entries:
        if entry.type != current_type:
            current_type = entry.type
            lines.append(f"\n[{entry.type.upper()}]")
        lines.append(f"- {entry.key}: {entry.content}")
    # Content is redacted on save; scrub again for secrets stored after the memory was.
    return scrub("\n".join(lines))


@prompt_section("memory")
def memory_section(team: Team) -> str:
    return render_memory(team)

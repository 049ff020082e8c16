"""The memory section of every team's prompt (registered on the prompt builder's hook)."""

from __future__ import annotations

from openhive.core.prompt_sections import PromptContext, prompt_section
from openhive.core.scrubbing import scrub
from teams.models import Team

from .models import Memory
from .selectors import memory_injectable, memory_injectable_read


def render_memory(team: Team, entries: list[Memory] | None = None) -> str:
    """`entries`: `memory_injectable(team=team)` if the caller read it already."""
    if entries is None:
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


@prompt_section("memory", order=20, load=memory_injectable_read)
def memory_section(ctx: PromptContext) -> str:
    return render_memory(ctx.team, ctx.data.get("memory"))

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from teams.models import Team


@dataclass
class ToolContext:
    """Everything a tool may know about its call: who calls, from which session, task, chat
    channel and topic. Tools never take these from the model's arguments."""

    team: Team
    session_id: int | None = None
    task_id: int | None = None
    source_channel: str = ""
    topic_id: int | None = None
    actor: str = ""
    allowed_tools: list[str] = field(default_factory=lambda: ["*"])

    @property
    def caller(self) -> str:
        return self.actor or self.team.name

"""What a tool call knows about its caller. The kernel does not know the teams app: a team is
anything with a primary key, a name and a parent id (in practice a `teams.Team` row)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from openhive.core.registry import ToolSpec


class TeamRef(Protocol):
    pk: Any
    name: str
    parent_id: Any


@dataclass
class ToolContext:
    """Everything a tool may know about its call: who calls, from which session, task, chat
    channel and topic. Tools never take these from the model's arguments. A tool reports side
    effects the caller of the session needs (e.g. the topic a turn opened) in `effects`; the
    session returns them in its outcome."""

    team: Any  # a TeamRef; tools in the apps use it as their Team row
    session_id: int | None = None
    task_id: int | None = None
    source_channel: str = ""
    topic_id: int | None = None
    actor: str = ""
    allowed_tools: list[str] = field(default_factory=lambda: ["*"])
    effects: dict[str, Any] = field(default_factory=dict)
    # The tools this session offers, by name (declared and run-time ones). A tool may add to
    # it for the rest of the session (a skill bringing in its tools); the loop re-offers them.
    tools: dict[str, ToolSpec] = field(default_factory=dict)

    @property
    def caller(self) -> str:
        return self.actor or self.team.name

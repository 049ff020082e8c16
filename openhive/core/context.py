"""What a tool call knows about its caller. The kernel does not know the teams app: a team is
anything with a primary key, a name and a parent id (in practice a `teams.Team` row)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from openhive.core.registry import ToolSpec


# Tools that pause the session to wait for a person: offered only where a session can pause.
PAUSING_TOOLS = frozenset({"ask_user"})


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
    # A task's own session can pause and wait for a person (`ask_user`, an approval); a chat
    # turn, a query or a subagent's session cannot. A tool asks for the pause by calling
    # `request_pause`: the loop stops after the call with stop reason `waiting`.
    pausable: bool = False
    pause: dict[str, Any] | None = None

    def request_pause(self, kind: str, **details: Any) -> None:
        self.pause = {"kind": kind, **details}

    @property
    def caller(self) -> str:
        return self.actor or self.team.name

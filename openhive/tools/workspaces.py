"""The calling team's workspace, as the file tools and the shell see it."""

from __future__ import annotations

from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.guards.workspace import Workspace
from teams.prompt import ancestors


def team_workspace(ctx: ToolContext) -> Workspace:
    workspace = Workspace.for_team(
        ctx.team.name, ancestors=[team.name for team in ancestors(ctx.team)]
    )
    if not workspace.root.is_dir():
        raise DomainError(
            f"the workspace of team {ctx.team.name} does not exist ({workspace.root}); ask the "
            "operator to restore it",
            code="workspace_missing",
        )
    return workspace

"""Parent/child checks shared by the tools, in code (never left to a prompt)."""

from __future__ import annotations

from openhive.core.context import ToolContext
from openhive.core.errors import NotAllowed

from .models import Team
from .selectors import team_named


def existing_team(name: str) -> Team:
    return team_named(name)


def child_team(ctx: ToolContext, name: str) -> Team:
    """The named team if it is a direct child of the caller."""
    team = team_named(name)
    if team.parent_id != ctx.team.pk:
        raise NotAllowed(
            f'"{name}" is not a child of "{ctx.team.name}": this tool works only on your own '
            "child teams",
            code="not_parent",
        )
    return team


def descendant_team(ctx: ToolContext, name: str) -> Team:
    """The named team if it sits below the caller in the tree (a child, a grandchild, ...).
    Never the caller itself: a team does not manage its own wake-ups."""
    team = team_named(name)
    node, seen = team, set()
    while node.parent_id is not None and node.pk not in seen:
        seen.add(node.pk)
        if node.parent_id == ctx.team.pk:
            return team
        node = Team.objects.only("pk", "parent_id").get(pk=node.parent_id)
    raise NotAllowed(
        f'"{name}" is not below "{ctx.team.name}" in the team tree: this tool works only on '
        "your own child teams and their descendants",
        code="not_parent",
    )

"""Parent/child checks shared by the org tools, in code (never left to a prompt)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator

from openhive.errors import NotAllowed, NotFound
from openhive.tools.context import ToolContext

from .models import Team
from .selectors import team_get


def existing_team(name: str) -> Team:
    team = team_get(name=name)
    if team is None:
        raise NotFound(f'team "{name}" not found')
    return team


def child_team(ctx: ToolContext, name: str) -> Team:
    """The named team if it is a direct child of the caller."""
    team = existing_team(name)
    if team.parent_id != ctx.team.pk:
        raise NotAllowed(
            f'"{name}" is not a child of "{ctx.team.name}": this tool works only on your own '
            "child teams",
            code="NOT_PARENT",
        )
    return team


@contextlib.contextmanager
def caller_org_op(ctx: ToolContext, operation: str) -> Iterator[None]:
    """Run an org tool under the caller team's org-op mutex (new daily-ops of the team wait,
    in-flight ones drain; the calling session's own task is not waited for)."""
    from tasks.admission import org_op

    holder = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{ctx.session_id}"
    with org_op(team=ctx.team, holder=holder, operation=operation, own_task_id=ctx.task_id):
        yield

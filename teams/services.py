"""State changes of the org tree as data: the root team, workspaces, scope keywords, the
bootstrapped flag, and messages between teams. Spawning and shutting down teams are use cases
over several apps: `openhive.org.services`."""

from __future__ import annotations

import re
from pathlib import Path

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from openhive.core import paths
from openhive.core.compiled import CompiledQuery
from openhive.core.errors import DomainError
from openhive.core.reads import Read
from openhive.core.scrubbing import scrub

from .config import default_config, write_team_config
from .models import MAIN_TEAM, TEAM_NAME_PATTERN, ScopeKeyword, Team, TeamMessage

WORKSPACE_FOLDERS = ("org-rules", "team-rules", "skills", "subagents", "plugins")
_NAME_RE = re.compile(TEAM_NAME_PATTERN)


# Read at every chat turn: compiled once, not at each turn.
_MAIN = CompiledQuery(lambda: Team.objects.filter(name=MAIN_TEAM))


def team_ensure_main() -> Team:
    """The root team exists after migrate/init, with a workspace and config."""
    workspace = paths.team_dir(MAIN_TEAM)
    configured = (workspace / "config.yaml").exists()
    found = _MAIN.rows(Team)
    if found and configured:
        return found[0]
    team, _ = Team.objects.get_or_create(
        name=MAIN_TEAM,
        defaults={"description": "Main orchestrator", "bootstrapped": True},
    )
    if not configured:
        team_workspace_scaffold(workspace)
        write_team_config(default_config(MAIN_TEAM, parent=None, description=team.description))
    return team


# Names that would shadow a fixed route (`/api/v1/teams/tree`) or the root team.
RESERVED_NAMES = frozenset({"tree", MAIN_TEAM})


def validate_team_name(name: str) -> None:
    if name in RESERVED_NAMES:
        raise DomainError(f'"{name}" is a reserved team name; choose another', code="invalid_name")
    if not _NAME_RE.fullmatch(name) or len(name) > 64:
        raise DomainError(
            "team name must be a lowercase slug (a-z, 0-9 and single hyphens), at most 64 "
            f"characters: {name!r}",
            code="invalid_name",
        )


def team_workspace_scaffold(workspace: Path) -> None:
    for folder in WORKSPACE_FOLDERS:
        (workspace / folder).mkdir(parents=True, exist_ok=True)


def team_mark_bootstrapped(*, team_id: int) -> None:
    Team.objects.filter(pk=team_id).update(bootstrapped=True)


@transaction.atomic
def team_update_scope(
    *, team: Team, add: list[str] | None = None, remove: list[str] | None = None
) -> list[str]:
    """Apply a keyword delta (lowercased, trimmed); a team never ends with zero keywords.
    Returns the resulting scope, sorted."""
    to_add = {k.strip().lower() for k in add or [] if k.strip()}
    to_remove = {k.strip().lower() for k in remove or [] if k.strip()}
    if not to_add and not to_remove:
        raise DomainError(
            "at least one of scope_add or scope_remove is required", code="invalid_input"
        )
    Team.objects.select_for_update().filter(pk=team.pk).first()
    current = set(team.scope_keywords.values_list("keyword", flat=True))
    result = (current | to_add) - to_remove
    if not result:
        raise DomainError(
            f'update would leave team "{team.name}" with zero scope keywords', code="zero_scope"
        )
    ScopeKeyword.objects.filter(team=team, keyword__in=current - result).delete()
    ScopeKeyword.objects.bulk_create(
        [ScopeKeyword(team=team, keyword=k) for k in sorted(result - current)]
    )
    return sorted(result)


# --- messages between teams (send_message, escalate) ----------------------------------------

INBOX_LIMIT = 20


@transaction.atomic
def teammessage_send(
    *,
    sender: Team,
    recipient: Team,
    content: str,
    kind: str = TeamMessage.Kind.MESSAGE,
    reason: str = "",
    correlation_id: str = "",
) -> TeamMessage:
    return TeamMessage.objects.create(
        sender=sender,
        recipient=recipient,
        kind=kind,
        # A known secret never travels to another team's prompt.
        content=scrub(content),
        reason=scrub(reason)[:500],
        correlation_id=correlation_id,
    )


def _unread(recipient_id: int, limit: int = INBOX_LIMIT) -> QuerySet[TeamMessage]:
    return TeamMessage.objects.filter(
        recipient_id=recipient_id, delivered_at__isnull=True
    ).order_by("id")[:limit]


_UNREAD = CompiledQuery(_unread)


def teammessages_take_unread(*, team: Team, limit: int = INBOX_LIMIT) -> list[TeamMessage]:
    """The oldest unread messages for `team`, marked delivered (a session is about to see
    them)."""
    if limit == INBOX_LIMIT:  # every session start asks, and the inbox is mostly empty
        candidates = _UNREAD.rows(TeamMessage, recipient_id=team.pk)
    else:
        candidates = list(_unread(team.pk, limit).select_related("sender"))
    return teammessages_take(candidates)


def teammessages_unread_read(*, team: Team) -> Read:
    """The candidates `teammessages_take_unread` reads, as a read a session's start sends with
    its other statements; its answer goes to `teammessages_take`."""
    return Read.of(TeamMessage, *_UNREAD.sql(recipient_id=team.pk))


def teammessages_take(candidates: list[TeamMessage]) -> list[TeamMessage]:
    """Of the unread `candidates`, those this caller marks delivered. Conditional update: two
    sessions starting at once do not both show a message."""
    shown: list[TeamMessage] = []
    now = timezone.now()
    for message in candidates:
        taken = TeamMessage.objects.filter(pk=message.pk, delivered_at__isnull=True).update(
            delivered_at=now
        )
        if taken:
            shown.append(message)
    return shown

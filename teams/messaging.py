"""Messages between teams (send_message, escalate): stored, shown to the recipient in its next
session (a prompt section), and visible to operators in the admin."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from openhive.engine.prompt import prompt_section
from vault.scrubbing import scrub

from .models import Team, TeamMessage

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


def teammessages_take_unread(*, team: Team, limit: int = INBOX_LIMIT) -> list[TeamMessage]:
    """The oldest unread messages for `team`, marked delivered (a session is about to see
    them). Conditional update: two sessions starting at once do not both show a message."""
    shown: list[TeamMessage] = []
    candidates = (
        TeamMessage.objects.filter(recipient=team, delivered_at__isnull=True)
        .select_related("sender")
        .order_by("id")[:limit]
    )
    now = timezone.now()
    for message in candidates:
        taken = TeamMessage.objects.filter(pk=message.pk, delivered_at__isnull=True).update(
            delivered_at=now
        )
        if taken:
            shown.append(message)
    return shown


@prompt_section("team-inbox")
def inbox_section(team: Team) -> str:
    if team.pk is None:
        return ""
    messages = teammessages_take_unread(team=team)
    if not messages:
        return ""
    lines = ["## Messages from other teams", ""]
    for m in messages:
        relation = "child" if m.sender.parent_id == team.pk else "parent"
        label = "ESCALATION" if m.kind == TeamMessage.Kind.ESCALATION else "message"
        reason = f" (reason: {m.reason})" if m.reason else ""
        stamp = m.created_at.strftime("%Y-%m-%d %H:%M UTC")
        lines.append(
            f"- [{label} from {relation} team `{m.sender.name}`, {stamp}]{reason} {m.content}"
        )
    return "\n".join(lines)

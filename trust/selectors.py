"""Reads of stored trust: grants and the decision log."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import SenderTrust, TrustAuditLog


def sender_trust_level(channel_type: str, channel_id: str, sender_id: str) -> str | None:
    """The stored level for a sender: a grant for this very channel id wins over a global one
    (empty channel id), so an operator can trust someone everywhere but one place."""
    rows = dict(
        SenderTrust.objects.filter(
            channel_type=channel_type, sender_id=sender_id, channel_id__in=[channel_id, ""]
        ).values_list("channel_id", "trust_level")
    )
    if channel_id in rows:
        return rows[channel_id]
    return rows.get("")


def sender_trust_list(
    *, channel_type: str | None = None, trust_level: str | None = None
) -> QuerySet[SenderTrust]:
    rows = SenderTrust.objects.all().order_by("channel_type", "sender_id", "channel_id")
    if channel_type:
        rows = rows.filter(channel_type=channel_type)
    if trust_level:
        rows = rows.filter(trust_level=trust_level)
    return rows


def sender_trust_summary(row: SenderTrust) -> dict:
    """One grant or denial as every door shows it (the tool, the REST API)."""
    return {
        "channel_type": row.channel_type,
        "channel_id": row.channel_id or None,
        "sender_id": row.sender_id,
        "trust_level": row.trust_level,
        "granted_by": row.granted_by,
        "created_at": row.created_at.isoformat(),
    }


def trust_audit_recent(*, limit: int = 100) -> QuerySet[TrustAuditLog]:
    return TrustAuditLog.objects.order_by("-created_at", "-id")[:limit]

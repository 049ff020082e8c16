"""Trust writes: API tokens (stored only as a SHA-256 digest), sender grants and denials, and
the append-only log of gate decisions."""

from __future__ import annotations

import hashlib
import logging
import re
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, transaction
from django.utils import timezone

from openhive.errors import DomainError, NotFound

from .gate import Decision, Sender, channel_type_of
from .models import ApiToken, SenderTrust, TrustAuditLog

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "ohk_"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(*, username: str, name: str = "") -> tuple[ApiToken, str]:
    """Returns the row and the plain token, which is never stored and never shown again."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f'user "{username}" not found; create it with `manage.py createsuperuser`')
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user, name=name, prefix=token[: len(TOKEN_PREFIX) + 4], token_hash=_digest(token)
    )
    return row, token


def api_token_authenticate(token: str) -> AbstractBaseUser | None:
    if not token or not token.startswith(TOKEN_PREFIX):
        return None
    row = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=_digest(token), revoked=False, user__is_active=True)
        .first()
    )
    if row is None:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row.user


def api_token_revoke(*, token_id: int) -> None:
    if not ApiToken.objects.filter(pk=token_id).update(revoked=True):
        raise NotFound(f"token {token_id} not found")


# --- sender trust -------------------------------------------------------------------------

TRUST_LEVELS = ("trusted", "denied")
CHANNEL_TYPE_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"


def _check_channel_type(channel_type: str) -> None:
    if not re.fullmatch(CHANNEL_TYPE_PATTERN, channel_type):
        raise DomainError(
            f"channel_type {channel_type!r} is not valid: use a lowercase word such as 'ws'",
            code="invalid_channel_type",
        )


def sender_trust_validate(*, channel_type: str, channel_id: str, sender_id: str) -> None:
    _check_channel_type(channel_type)
    if not sender_id.strip() or len(sender_id) > 200:
        raise DomainError("sender_id must be 1-200 characters", code="invalid_sender")
    if channel_id and channel_type_of(channel_id) != channel_type:
        raise DomainError(
            f"channel_id {channel_id!r} does not belong to channel type {channel_type!r} "
            f"(ids look like '{channel_type}:...')",
            code="invalid_channel_id",
        )


@transaction.atomic
def sender_trust_set(
    *,
    channel_type: str,
    sender_id: str,
    channel_id: str = "",
    trust_level: str = "trusted",
    granted_by: str,
) -> SenderTrust:
    """Grant (`trusted`) or explicitly deny (`denied`) a sender, globally when channel_id is
    empty. Setting it again replaces the level."""
    sender_trust_validate(channel_type=channel_type, channel_id=channel_id, sender_id=sender_id)
    if trust_level not in TRUST_LEVELS:
        raise DomainError(
            f"trust_level must be one of {', '.join(TRUST_LEVELS)}", code="invalid_trust_level"
        )
    row, _ = SenderTrust.objects.update_or_create(
        channel_type=channel_type,
        channel_id=channel_id,
        sender_id=sender_id,
        defaults={"trust_level": trust_level, "granted_by": granted_by[:100]},
    )
    return row


@transaction.atomic
def sender_trust_revoke(*, channel_type: str, sender_id: str, channel_id: str = "") -> int:
    """Remove a stored grant or denial; the policy decides about the sender again."""
    sender_trust_validate(channel_type=channel_type, channel_id=channel_id, sender_id=sender_id)
    deleted, _ = SenderTrust.objects.filter(
        channel_type=channel_type, channel_id=channel_id, sender_id=sender_id
    ).delete()
    if not deleted:
        where = f"channel {channel_id}" if channel_id else "all channels (global)"
        raise NotFound(f'no stored trust for sender "{sender_id}" on {channel_type}, {where}')
    return deleted


def trust_audit_record(*, sender: Sender, decision: Decision) -> TrustAuditLog | None:
    """Append the decision to the log. A failed write is logged, never raised: the decision
    stands either way (and a deny-policy channel has already failed closed)."""
    try:
        with transaction.atomic():  # a savepoint: a failed insert must not poison the caller's
            return TrustAuditLog.objects.create(
                channel_type=sender.channel_type,
                channel_id=sender.channel_id[:200],
                sender_id=sender.sender_id[:200],
                sender_asserted=sender.asserted,
                decision=decision.label,
                reason=decision.reason,
            )
    except DatabaseError:
        logger.exception("trust gate: could not write the audit row")
        return None

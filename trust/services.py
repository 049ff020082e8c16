"""Trust writes: API tokens (stored only as a SHA-256 digest), sender grants and denials, and
the append-only log of gate decisions."""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from openhive.core.errors import DomainError, NotFound
from openhive.core.inlist import any_of
from openhive.core.rows import insert_statement

from .gate import DENY_RESPOND, Decision, Sender, channel_type_of, trust_evaluate
from .models import ApiToken, SenderTrust, TrustAuditLog
from .policy import PolicyError, load_trust_policy
from .selectors import sender_trust_level

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "ohk_"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


OPERATOR = "operator"
CHAT = "chat"
RIGHTS_TEXT = {
    OPERATOR: "operator rights: every API operation (teams, tasks, triggers, vault, trust, "
    "sessions, audit, every topic) and the chat",
    CHAT: "chat rights: the chat socket and reading its own topics (GET /api/v1/topics); "
    "no operator operation",
}


@dataclass(frozen=True)
class ApiIdentity:
    """Who a token speaks for and what it may do (`operator` or `chat`)."""

    user: AbstractBaseUser
    rights: str

    @property
    def is_operator(self) -> bool:
        return self.rights == OPERATOR


def token_rights(*, scope: str, is_staff: bool) -> str:
    """A token carries its user's rights unless its scope says otherwise: staff operate,
    everyone else chats; an explicit scope grants operator or restricts to chat."""
    if scope == ApiToken.Scope.OPERATOR:
        return OPERATOR
    if scope == ApiToken.Scope.CHAT:
        return CHAT
    return OPERATOR if is_staff else CHAT


def api_token_create(
    *, username: str, name: str = "", scope: str = ApiToken.Scope.USER
) -> tuple[ApiToken, str]:
    """Returns the row and the plain token, which is never stored and never shown again."""
    if scope not in ApiToken.Scope.values:
        raise DomainError(
            f"scope must be one of {', '.join(ApiToken.Scope.values)}; got {scope!r}",
            code="invalid_scope",
        )
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f'user "{username}" not found; create it with `manage.py createsuperuser`')
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=token[: len(TOKEN_PREFIX) + 4],
        token_hash=_digest(token),
        scope=scope,
    )
    return row, token


def api_token_identify(token: str) -> ApiIdentity | None:
    """The user and rights behind a live token; None for anything else."""
    # Tokens are URL-safe ASCII: anything else (a NUL, a lone surrogate) cannot be one, and
    # must not reach the hash or the database.
    if not token.startswith(TOKEN_PREFIX) or not (token.isascii() and token.isprintable()):
        return None
    row = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=_digest(token), revoked=False, user__is_active=True)
        .first()
    )
    if row is None:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    rights = token_rights(scope=row.scope, is_staff=bool(row.user.is_staff))
    return ApiIdentity(row.user, rights)


def api_token_authenticate(token: str) -> AbstractBaseUser | None:
    identity = api_token_identify(token)
    return identity.user if identity else None


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


def trust_gate_check(sender: Sender) -> Decision:
    """The gate as the chat uses it: load the policy, decide, write the audit row."""
    try:
        policy = load_trust_policy().policy
        decision = trust_evaluate(policy, sender, sender_trust_level)
    except PolicyError:
        logger.exception("trust gate: the trust policy cannot be loaded; refusing everyone")
        decision = Decision(DENY_RESPOND, "policy_invalid")
    trust_audit_record(sender=sender, decision=decision)
    return decision


def trust_gate_decide_many(senders: list[Sender]) -> list[Decision]:
    """The gate's decisions for many senders at once (a burst of chat messages): the policy
    loaded once and every stored grant they could match read in one query. Writes nothing;
    `trust_audit_record_many` logs the decisions that stand."""
    try:
        policy = load_trust_policy().policy
    except PolicyError:
        logger.exception("trust gate: the trust policy cannot be loaded; refusing everyone")
        return [Decision(DENY_RESPOND, "policy_invalid") for _ in senders]
    grants: dict[tuple[str, str, str], str] = {}
    if policy is not None and senders:
        try:
            rows = SenderTrust.objects.filter(
                channel_type__in={s.channel_type for s in senders},
                sender_id__in=any_of({s.sender_id for s in senders}),
            ).values_list("channel_type", "sender_id", "channel_id", "trust_level")
            grants = {(t, s, c): level for t, s, c, level in rows}
        except DatabaseError:
            grants = None  # type: ignore[assignment]  # each lookup fails as the gate expects

    def lookup(channel_type: str, channel_id: str, sender_id: str) -> str | None:
        if grants is None:
            raise DatabaseError("stored grants unreadable")
        # The channel's own grant wins over a global one, as in sender_trust_level.
        return grants.get((channel_type, sender_id, channel_id)) or grants.get(
            (channel_type, sender_id, "")
        )

    return [trust_evaluate(policy, sender, lookup) for sender in senders]


def trust_audit_statement(entries: list[tuple[Sender, Decision]]) -> tuple[str, list]:
    """The INSERT of the audit rows of many decisions (built by `insert_statement`), for a
    caller that sends it with its own statements (`trust_audit_record_many` sends it alone)."""
    now = timezone.now()
    rows = [
        {
            "channel_type": sender.channel_type,
            "channel_id": sender.channel_id[:200],
            "sender_id": sender.sender_id[:200],
            "sender_asserted": sender.asserted,
            "decision": decision.label,
            "reason": decision.reason,
            "created_at": now,
        }
        for sender, decision in entries
    ]
    return insert_statement(TrustAuditLog, rows)


def trust_audit_record_many(entries: list[tuple[Sender, Decision]]) -> None:
    """`trust_audit_record` for many decisions, in one insert (through bulk_create, a chat
    burst's 200 rows cost the web process a third of each ack)."""
    if not entries:
        return
    try:
        with transaction.atomic(), connection.cursor() as cursor:  # a savepoint, as before
            cursor.execute(*trust_audit_statement(entries))
    except DatabaseError:
        logger.exception("trust gate: could not write the audit rows")

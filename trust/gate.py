"""The TrustGate: decides, in code and before any model sees a word, whether an inbound message
may go on. First match wins, in this order:

1. sender on the channel type's denylist       → deny, silently
2. stored grant (per channel id, then global)   → `trusted` allows, `denied` denies silently
3. sender on the channel type's allowlist      → allow
4. override for this channel id                → its policy
5. the channel type's policy                   → its policy
6. the default policy                          → its policy

A denial by policy (steps 4-6) is answered with one static "not authorized" error; a sender who
was explicitly denied (steps 1-2) gets nothing, so they cannot tell they reached anyone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from .policy import PolicyError, TrustPolicy, load_trust_policy

logger = logging.getLogger(__name__)

ALLOW = "allow"
DENY_SILENT = "deny_silent"
DENY_RESPOND = "deny_respond"

NOT_AUTHORIZED_MESSAGE = "Not authorized."

# (channel_type, channel_id, sender_id) -> stored trust level or None
GrantLookup = Callable[[str, str, str], "str | None"]


def channel_type_of(channel_id: str) -> str:
    """`ws:user:3` → `ws`. Every adapter prefixes its ids, so a type is never guessed."""
    head, sep, _ = channel_id.partition(":")
    return head if sep and head else "other"


@dataclass(frozen=True)
class Sender:
    channel_id: str
    sender_id: str
    asserted: bool = False  # the client claimed this id; nothing verified it

    @property
    def channel_type(self) -> str:
        return channel_type_of(self.channel_id)


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str

    @property
    def allowed(self) -> bool:
        return self.action == ALLOW

    @property
    def silent(self) -> bool:
        return self.action == DENY_SILENT

    @property
    def label(self) -> str:
        """What the audit and the message record: `allowed` or `denied`."""
        return "allowed" if self.allowed else "denied"


def _by_policy(policy: str, reason_prefix: str) -> Decision:
    if policy == "allow":
        return Decision(ALLOW, f"{reason_prefix}_allow")
    return Decision(DENY_RESPOND, f"{reason_prefix}_deny")


def trust_evaluate(policy: TrustPolicy | None, sender: Sender, lookup: GrantLookup) -> Decision:
    """Pure: the decision for one sender under one policy, given a way to read stored grants."""
    if policy is None:
        return Decision(ALLOW, "no_trust_config")
    channel = policy.channel(sender.channel_type)
    if sender.sender_id in channel.sender_denylist:
        return Decision(DENY_SILENT, "sender_denylist")
    try:
        level = lookup(sender.channel_type, sender.channel_id, sender.sender_id)
    except Exception:
        # Unknown grants: a channel that would deny strangers must not let anyone through.
        logger.exception("trust gate: stored grants unreadable for %s", sender.channel_id)
        if policy.effective_policy(sender.channel_type, sender.channel_id) == "deny":
            return Decision(DENY_RESPOND, "grants_unreadable_fail_closed")
        level = None
    if level == "trusted":
        return Decision(ALLOW, "db_trusted")
    if level == "denied":
        return Decision(DENY_SILENT, "db_denied")
    if sender.sender_id in channel.sender_allowlist:
        return Decision(ALLOW, "sender_allowlist")
    override = policy.channel_overrides.get(sender.channel_id)
    if override is not None:
        return _by_policy(override.policy, "channel_override")
    if channel.policy is not None:
        return _by_policy(channel.policy, "channel_policy")
    return _by_policy(policy.default_policy, "default_policy")


def may_assert_sender(channel_type: str) -> bool:
    """Whether an unauthenticated client may claim a sender id on this channel type. Only an
    explicit `allow_asserted_sender: true` permits it; no policy, or a broken one, does not."""
    try:
        policy = load_trust_policy().policy
    except PolicyError:
        return False
    return policy is not None and policy.channel(channel_type).allow_asserted_sender

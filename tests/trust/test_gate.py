"""The trust gate's decision order, one step at a time, as a pure function."""

from __future__ import annotations

import pytest
from django.db import DatabaseError

from trust.gate import (
    ALLOW,
    DENY_RESPOND,
    DENY_SILENT,
    Sender,
    channel_type_of,
    trust_evaluate,
)
from trust.policy import TrustPolicy

ALICE = Sender(channel_id="ws:user:1", sender_id="alice")


def grants(table: dict[tuple[str, str, str], str] | None = None):
    """A stored-grant lookup over a dict keyed (channel_type, channel_id, sender_id); a key
    with an empty channel id is a global grant, used when no per-channel one exists."""
    table = table or {}

    def lookup(channel_type: str, channel_id: str, sender_id: str) -> str | None:
        return table.get((channel_type, channel_id, sender_id)) or table.get(
            (channel_type, "", sender_id)
        )

    return lookup


def failing_lookup(*args: str) -> str | None:
    raise DatabaseError("database is locked")


def policy(**kwargs) -> TrustPolicy:
    return TrustPolicy.model_validate(kwargs)


def decide(p: TrustPolicy | None, lookup=None, sender: Sender = ALICE) -> tuple[str, str]:
    d = trust_evaluate(p, sender, lookup or grants())
    return d.action, d.reason


def test_no_trust_section_allows_everyone():
    assert decide(None) == (ALLOW, "no_trust_config")


def test_step1_denylist_denies_silently():
    p = policy(channels={"ws": {"sender_denylist": ["alice"]}})
    assert decide(p) == (DENY_SILENT, "sender_denylist")


def test_denylist_beats_a_stored_grant_and_the_allowlist():
    p = policy(channels={"ws": {"sender_denylist": ["alice"], "sender_allowlist": ["alice"]}})
    lookup = grants({("ws", "ws:user:1", "alice"): "trusted"})
    assert decide(p, lookup) == (DENY_SILENT, "sender_denylist")


def test_step2_stored_trust_allows_even_when_the_policy_denies():
    p = policy(default_policy="deny", channels={"ws": {"policy": "deny"}})
    assert decide(p, grants({("ws", "ws:user:1", "alice"): "trusted"})) == (ALLOW, "db_trusted")


def test_step2_stored_denial_is_silent_and_beats_the_allowlist():
    p = policy(channels={"ws": {"sender_allowlist": ["alice"]}})
    assert decide(p, grants({("ws", "", "alice"): "denied"})) == (DENY_SILENT, "db_denied")


def test_step2_a_global_grant_matches_any_channel_id():
    p = policy(default_policy="deny")
    lookup = grants({("ws", "", "alice"): "trusted"})
    assert decide(p, lookup, Sender("ws:user:99", "alice")) == (ALLOW, "db_trusted")


def test_step3_allowlist_allows():
    p = policy(
        default_policy="deny", channels={"ws": {"policy": "deny", "sender_allowlist": ["alice"]}}
    )
    assert decide(p) == (ALLOW, "sender_allowlist")


def test_step4_channel_override_beats_the_channel_policy():
    p = policy(
        channels={"ws": {"policy": "allow"}},
        channel_overrides={"ws:user:1": {"policy": "deny"}},
    )
    assert decide(p) == (DENY_RESPOND, "channel_override_deny")
    p = policy(
        channels={"ws": {"policy": "deny"}},
        channel_overrides={"ws:user:1": {"policy": "allow"}},
    )
    assert decide(p) == (ALLOW, "channel_override_allow")


def test_step5_channel_policy_beats_the_default():
    assert decide(policy(default_policy="allow", channels={"ws": {"policy": "deny"}})) == (
        DENY_RESPOND,
        "channel_policy_deny",
    )
    assert decide(policy(default_policy="deny", channels={"ws": {"policy": "allow"}})) == (
        ALLOW,
        "channel_policy_allow",
    )


def test_step6_default_policy_decides_last():
    assert decide(policy(default_policy="deny")) == (DENY_RESPOND, "default_policy_deny")
    assert decide(policy(default_policy="allow")) == (ALLOW, "default_policy_allow")


def test_other_channel_types_do_not_use_the_ws_lists():
    p = policy(default_policy="allow", channels={"ws": {"sender_denylist": ["alice"]}})
    assert decide(p, sender=Sender("discord:123", "alice")) == (ALLOW, "default_policy_allow")


def test_unreadable_grants_fail_closed_where_the_policy_denies():
    p = policy(default_policy="deny")
    assert decide(p, failing_lookup) == (DENY_RESPOND, "grants_unreadable_fail_closed")


def test_unreadable_grants_fail_closed_for_a_deny_override_on_an_allow_channel():
    p = policy(default_policy="allow", channel_overrides={"ws:user:1": {"policy": "deny"}})
    assert decide(p, failing_lookup) == (DENY_RESPOND, "grants_unreadable_fail_closed")


def test_unreadable_grants_fall_through_where_the_policy_allows():
    assert decide(policy(default_policy="allow"), failing_lookup) == (
        ALLOW,
        "default_policy_allow",
    )


def test_the_denylist_still_applies_when_grants_are_unreadable():
    p = policy(default_policy="allow", channels={"ws": {"sender_denylist": ["alice"]}})
    assert decide(p, failing_lookup) == (DENY_SILENT, "sender_denylist")


@pytest.mark.parametrize(
    "channel_id, expected",
    [("ws:user:1", "ws"), ("discord:42", "discord"), ("12345", "other"), (":x", "other")],
)
def test_channel_type_comes_from_the_id_prefix(channel_id, expected):
    assert channel_type_of(channel_id) == expected

"""The gate as the chat uses it: policy from channels.yaml, stored grants, audit rows."""

from __future__ import annotations

import pytest
from django.db import DatabaseError

from trust import services as trust_services
from trust.gate import ALLOW, DENY_RESPOND, DENY_SILENT, Sender, may_assert_sender
from trust.models import TrustAuditLog
from trust.services import sender_trust_set, trust_gate_check

pytestmark = pytest.mark.django_db
BOB = Sender(channel_id="ws:user:7", sender_id="bob")


def test_every_decision_is_audited_with_its_reason(trust_policy):
    trust_policy({"default_policy": "deny", "channels": {"ws": {"sender_denylist": ["eve"]}}})
    trust_gate_check(BOB)
    trust_gate_check(Sender("ws:user:8", "eve"))
    sender_trust_set(channel_type="ws", sender_id="bob", granted_by="test")
    trust_gate_check(BOB)
    rows = list(TrustAuditLog.objects.order_by("id").values_list("sender_id", "decision", "reason"))
    assert rows == [
        ("bob", "denied", "default_policy_deny"),
        ("eve", "denied", "sender_denylist"),
        ("bob", "allowed", "db_trusted"),
    ]


def test_a_grant_for_this_channel_beats_a_global_denial(trust_policy):
    trust_policy({"default_policy": "allow"})
    sender_trust_set(channel_type="ws", sender_id="bob", trust_level="denied", granted_by="t")
    sender_trust_set(channel_type="ws", sender_id="bob", channel_id="ws:user:7", granted_by="t")
    assert trust_gate_check(BOB).action == ALLOW
    assert trust_gate_check(Sender("ws:user:9", "bob")).action == DENY_SILENT


def test_database_error_fails_closed_on_a_deny_channel_and_is_audited(trust_policy, monkeypatch):
    trust_policy({"default_policy": "allow", "channels": {"ws": {"policy": "deny"}}})
    sender_trust_set(channel_type="ws", sender_id="bob", granted_by="t")

    def broken(*args):
        raise DatabaseError("could not connect to server")

    monkeypatch.setattr(trust_services, "sender_trust_level", broken)
    decision = trust_gate_check(BOB)
    assert (decision.action, decision.reason) == (DENY_RESPOND, "grants_unreadable_fail_closed")
    assert TrustAuditLog.objects.get().reason == "grants_unreadable_fail_closed"


def test_a_broken_channels_file_refuses_everyone(trust_policy):
    path = trust_policy({"default_policy": "allow"})
    path.write_text("trust:\n  default_policy: maybe\n")
    decision = trust_gate_check(BOB)
    assert (decision.action, decision.reason) == (DENY_RESPOND, "policy_invalid")


def test_no_trust_section_allows_and_warns_once(trust_policy, caplog):
    trust_policy(None)
    assert trust_gate_check(BOB).reason == "no_trust_config"
    trust_gate_check(BOB)
    warnings = [r for r in caplog.records if "No trust policy:" in r.message]
    assert len(warnings) <= 1  # once per file and process (may have been logged earlier)


def test_asserted_ids_need_an_explicit_permission(trust_policy):
    trust_policy(None)
    assert not may_assert_sender("ws")
    trust_policy({"channels": {"ws": {"allow_asserted_sender": True}}})
    assert may_assert_sender("ws")
    assert not may_assert_sender("discord")


def test_asserted_sender_is_marked_in_the_audit(trust_policy):
    trust_policy({"default_policy": "allow"})
    trust_gate_check(Sender("ws:anon:zed", "anon:zed", asserted=True))
    assert TrustAuditLog.objects.get().sender_asserted is True

"""The trust REST endpoints and the admin's grant/deny/revoke actions."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.api.factories import UserFactory
from trust.gate import Sender
from trust.models import SenderTrust
from trust.services import api_token_create, sender_trust_set, trust_gate_check

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def client_for(username: str, *, staff: bool) -> Client:
    UserFactory(username=username, is_staff=staff)
    return Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(username=username)[1]}")


def test_staff_grants_lists_and_revokes_through_the_api():
    api = client_for("ops-lead", staff=True)
    created = api.post(
        "/api/v1/trust",
        {"channel_type": "ws", "sender_id": "bob", "channel_id": "ws:user:4"},
        content_type="application/json",
    )
    assert created.status_code == 201 and created.json()["granted_by"] == "api:ops-lead"
    assert [r["sender_id"] for r in api.get("/api/v1/trust?channel_type=ws").json()] == ["bob"]
    revoked = api.post(
        "/api/v1/trust/revoke",
        {"channel_type": "ws", "sender_id": "bob", "channel_id": "ws:user:4"},
        content_type="application/json",
    )
    assert revoked.status_code == 200 and not SenderTrust.objects.exists()


def test_non_staff_tokens_may_neither_read_nor_change_trust():
    api = client_for("viewer", staff=False)
    assert api.get("/api/v1/trust").status_code == 403
    refused = api.post(
        "/api/v1/trust", {"channel_type": "ws", "sender_id": "me"}, content_type="application/json"
    )
    assert refused.status_code == 403 and "operator rights" in refused.json()["detail"]
    assert refused.json()["code"] == "operator_only"
    assert not SenderTrust.objects.exists()


@pytest.mark.parametrize(
    "body, status",
    [
        ({"channel_type": "ws"}, 422),
        ({"channel_type": "ws", "sender_id": "b", "trust_level": "maybe"}, 422),
        ({"channel_type": "ws", "sender_id": "b", "channel_id": "discord:1"}, 400),
    ],
)
def test_bad_grants_get_json_4xx_and_change_nothing(body, status):
    response = client_for("ops-lead", staff=True).post(
        "/api/v1/trust", body, content_type="application/json"
    )
    assert response.status_code == status and "detail" in response.json()
    assert not SenderTrust.objects.exists()


def test_revoking_nothing_is_404():
    response = client_for("ops-lead", staff=True).post(
        "/api/v1/trust/revoke",
        {"channel_type": "ws", "sender_id": "ghost"},
        content_type="application/json",
    )
    assert response.status_code == 404


def test_audit_and_policy_endpoints(trust_policy):
    trust_policy({"default_policy": "deny"})
    trust_gate_check(Sender("ws:user:3", "carol"))
    api = client_for("viewer", staff=True)
    audit = api.get("/api/v1/trust/audit?limit=5").json()
    assert audit[0]["reason"] == "default_policy_deny" and audit[0]["sender_id"] == "carol"
    policy = api.get("/api/v1/trust/policy").json()
    assert policy["status"] == "active" and policy["policy"]["default_policy"] == "deny"


def test_admin_actions_grant_deny_and_revoke(admin_client):
    row = sender_trust_set(channel_type="ws", sender_id="bob", granted_by="t")
    url = reverse("admin:trust_sendertrust_changelist")
    admin_client.post(url, {"action": "deny_senders", "_selected_action": [row.pk]})
    assert SenderTrust.objects.get().trust_level == "denied"
    admin_client.post(url, {"action": "grant_trust", "_selected_action": [row.pk]})
    assert SenderTrust.objects.get().trust_level == "trusted"
    admin_client.post(url, {"action": "revoke_trust", "_selected_action": [row.pk]})
    assert not SenderTrust.objects.exists()


def test_admin_list_shows_the_loaded_policy(admin_client, trust_policy):
    trust_policy({"default_policy": "deny", "channels": {"ws": {"sender_denylist": ["eve"]}}})
    page = admin_client.get(reverse("admin:trust_sendertrust_changelist")).content.decode()
    assert "Trust policy (active)" in page and "default_policy: deny" in page and "eve" in page


def test_admin_add_form_validates_like_the_tools(admin_client):
    response = admin_client.post(
        reverse("admin:trust_sendertrust_add"),
        {
            "channel_type": "ws",
            "channel_id": "discord:9",
            "sender_id": "bob",
            "trust_level": "trusted",
            "granted_by": "",
        },
    )
    assert response.status_code == 200 and "does not belong" in response.content.decode()
    assert not SenderTrust.objects.exists()

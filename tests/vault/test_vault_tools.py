"""Vault tools (own team only; secrets readable, never writable by teams), the vault REST
routes (no secret value ever returned) and key rotation (service and command)."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError

from openhive.core.context import ToolContext
from openhive.engine.models import ToolCall
from openhive.engine.tool_calls import call_tool
from tests.api.conftest import api_client, api_token, fast_password_hashing  # noqa: F401
from tests.factories import TeamFactory
from vault import crypto
from vault.models import VaultEntry
from vault.services import vault_rotate_key, vault_store_secret

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("vault_key")]

SECRET = "tok-9f8e7d6c5b4a3210"


@pytest.fixture
def ops(main_team):
    team = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=team, key="API_TOKEN", value=SECRET, updated_by="main")
    return team


def call(team, tool, **arguments):
    return call_tool(ToolContext(team=team, actor=team.name), tool, arguments)


def test_vault_set_stores_state_and_versions_it(ops):
    assert call(ops, "vault_set", key="cursor", value="42") == {
        "success": True,
        "key": "cursor",
        "created": True,
        "version": 1,
    }
    assert call(ops, "vault_set", key="cursor", value="43")["version"] == 2
    entry = VaultEntry.objects.get(team=ops, key="cursor")
    assert entry.value == "43" and not entry.is_secret and entry.updated_by == "ops"


def test_vault_set_and_delete_refuse_secret_rows(ops):
    refused = call(ops, "vault_set", key="API_TOKEN", value="overwritten")
    assert refused["success"] is False and refused["code"] == "SECRET_READ_ONLY"
    assert call(ops, "vault_delete", key="API_TOKEN")["code"] == "SECRET_READ_ONLY"
    raw = VaultEntry.objects.get(team=ops, key="API_TOKEN").value
    assert crypto.decrypt(raw) == SECRET


def test_vault_get_returns_the_secret_to_the_team_but_the_audit_row_is_scrubbed(ops):
    result = call(ops, "vault_get", key="API_TOKEN")
    assert result == {"success": True, "key": "API_TOKEN", "value": SECRET, "is_secret": True}
    row = ToolCall.objects.get(tool="vault_get")
    assert SECRET not in str(row.result) and "[REDACTED]" in str(row.result)


def test_vault_get_of_an_undecryptable_secret_is_a_clear_error(ops):
    VaultEntry.objects.create(team=ops, key="BROKEN", value="not-a-token", is_secret=True)
    result = call(ops, "vault_get", key="BROKEN")
    assert result["success"] is False and result["code"] == "VAULT_KEY_MISMATCH"
    assert "OPENHIVE_VAULT_KEY" in result["error"]


def test_vault_get_of_a_missing_key_is_a_clear_error(ops):
    result = call(ops, "vault_get", key="nope")
    assert result["success"] is False and "not found" in result["error"]


def test_vault_list_never_shows_secret_values(ops):
    call(ops, "vault_set", key="cursor", value="42")
    listed = call(ops, "vault_list")
    by_key = {e["key"]: e for e in listed["entries"]}
    assert "value" not in by_key["API_TOKEN"] and by_key["API_TOKEN"]["is_secret"]
    assert by_key["cursor"]["value"] == "42"
    assert SECRET not in str(listed)
    assert [e["key"] for e in call(ops, "vault_list", prefix="cur")["entries"]] == ["cursor"]


def test_vault_delete_removes_state_and_a_missing_key_is_not_an_error(ops):
    call(ops, "vault_set", key="cursor", value="42")
    assert call(ops, "vault_delete", key="cursor")["deleted"] is True
    assert call(ops, "vault_delete", key="cursor") == {"success": True, "deleted": False}


def test_vault_tools_never_cross_teams(ops, main_team):
    other = TeamFactory(name="research", parent=main_team)
    call(other, "vault_set", key="cursor", value="theirs")
    assert call(ops, "vault_get", key="cursor")["success"] is False
    assert call(other, "vault_get", key="API_TOKEN")["success"] is False
    assert [e["key"] for e in call(other, "vault_list")["entries"]] == ["cursor"]
    assert call(ops, "vault_delete", key="cursor")["deleted"] is False


def test_rest_vault_lists_keys_and_metadata_never_secret_values(api_client, ops):  # noqa: F811
    call(ops, "vault_set", key="cursor", value="42")
    response = api_client.get("/api/v1/vault/ops")
    assert response.status_code == 200
    assert SECRET not in response.content.decode()
    by_key = {e["key"]: e for e in response.json()}
    assert by_key["API_TOKEN"]["value"] is None and by_key["API_TOKEN"]["is_secret"]
    assert by_key["cursor"]["value"] == "42"


def test_rest_vault_sets_and_deletes_secrets_without_echoing_them(api_client, ops):  # noqa: F811
    response = api_client.put(
        "/api/v1/vault/ops/DB_PASSWORD",
        {"value": "pw-0123456789abc"},
        content_type="application/json",
    )
    assert response.status_code == 200
    assert "pw-0123456789abc" not in response.content.decode()
    assert response.json()["is_secret"] and response.json()["value"] is None
    raw = VaultEntry.objects.get(team=ops, key="DB_PASSWORD").value
    assert crypto.decrypt(raw) == "pw-0123456789abc"
    assert api_client.delete("/api/v1/vault/ops/DB_PASSWORD").status_code == 204
    assert api_client.delete("/api/v1/vault/ops/DB_PASSWORD").status_code == 404
    assert api_client.get("/api/v1/vault/nope").status_code == 404
    bad = api_client.put("/api/v1/vault/ops/x", {"value": ""}, content_type="application/json")
    assert bad.status_code == 422 or bad.status_code == 400


def test_rest_vault_requires_authentication(client, ops):
    assert client.get("/api/v1/vault/ops").status_code == 401


def test_rotation_re_encrypts_every_secret_with_the_new_key(ops, settings, vault_key):
    old_raw = VaultEntry.objects.get(team=ops, key="API_TOKEN").value
    new_key = Fernet.generate_key().decode()
    settings.VAULT_KEYS = [new_key, vault_key]
    crypto.reset_keys()
    assert crypto.decrypt(old_raw) == SECRET  # old ciphertext still readable
    report = vault_rotate_key()
    assert report.rotated == 1 and report.failed == []
    entry = VaultEntry.objects.get(team=ops, key="API_TOKEN")
    assert entry.value != old_raw and entry.version == 1
    assert Fernet(new_key.encode()).decrypt(entry.value.encode()).decode() == SECRET
    settings.VAULT_KEYS = [new_key]  # the old key can go now
    crypto.reset_keys()
    assert crypto.decrypt(entry.value) == SECRET


def test_rotation_leaves_undecryptable_rows_alone_and_reports_them(ops):
    VaultEntry.objects.create(team=ops, key="BROKEN", value="not-a-token", is_secret=True)
    report = vault_rotate_key()
    assert report.rotated == 1 and report.failed == ["ops:BROKEN"]
    assert VaultEntry.objects.get(key="BROKEN").value == "not-a-token"


def test_rotation_from_the_derived_key_to_an_explicit_one(ops, settings):
    settings.VAULT_KEYS = []
    crypto.reset_keys()
    vault_store_secret(team=ops, key="DERIVED", value="derived-secret-123", updated_by="t")
    new_key = Fernet.generate_key().decode()
    settings.VAULT_KEYS = [new_key]
    crypto.reset_keys()
    assert vault_rotate_key().failed == ["ops:API_TOKEN"]  # that one used the fixture's key
    raw = VaultEntry.objects.get(key="DERIVED").value
    assert Fernet(new_key.encode()).decrypt(raw.encode()).decode() == "derived-secret-123"


def test_rotate_vault_key_command(ops, settings, vault_key, capsys):
    settings.VAULT_KEYS = [Fernet.generate_key().decode(), vault_key]
    crypto.reset_keys()
    call_command("openhive", "rotate-vault-key")
    out = capsys.readouterr().out
    assert "Re-encrypted 1 secret(s)" in out and "older keys can be removed" in out
    assert SECRET not in out
    call_command("openhive", "rotate-vault-key", "--generate")
    Fernet(capsys.readouterr().out.strip().encode())  # a valid key
    settings.VAULT_KEYS = ["not-a-key"]
    crypto.reset_keys()
    with pytest.raises(CommandError, match="not a Fernet key"):
        call_command("openhive", "rotate-vault-key")
    settings.VAULT_KEYS = []
    with pytest.raises(CommandError, match="OPENHIVE_VAULT_KEY is not set"):
        call_command("openhive", "rotate-vault-key")

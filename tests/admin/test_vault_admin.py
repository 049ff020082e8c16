"""A vault secret is write-only in the back office: stored encrypted, never displayed."""

import pytest
from django.urls import reverse

from tests.api.factories import VaultEntryFactory
from vault import crypto
from vault.models import VaultEntry
from vault.services import vault_store_secret

pytestmark = pytest.mark.django_db

SECRET = "pa55word-Zx9-very-secret"
ADD_URL = "/admin/vault/vaultentry/"


def _url(entry: VaultEntry, view: str) -> str:
    return reverse(f"admin:vault_vaultentry_{view}", args=(entry.pk,))


@pytest.fixture
def secret_entry(main_team) -> VaultEntry:
    return vault_store_secret(team=main_team, key="DB_PASSWORD", value=SECRET, updated_by="tests")


def test_secret_value_and_ciphertext_never_appear_in_admin_pages(admin_client, secret_entry):
    admin_client.post(_url(secret_entry, "change"), {"new_secret_value": SECRET + "-2"})
    pages = [
        ADD_URL,
        ADD_URL + "?q=DB",
        _url(secret_entry, "change"),
        _url(secret_entry, "history"),
        _url(secret_entry, "delete"),
    ]
    secret_entry.refresh_from_db()
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        assert SECRET not in html, page
        assert secret_entry.value not in html, page
    assert "DB_PASSWORD" in admin_client.get(ADD_URL).content.decode()


def test_write_only_field_stores_an_encrypted_secret(admin_client, main_team):
    response = admin_client.post(
        ADD_URL + "add/",
        {"team": main_team.pk, "key": "API_KEY", "value": "", "new_secret_value": SECRET},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    entry = VaultEntry.objects.get(team=main_team, key="API_KEY")
    assert entry.is_secret
    assert entry.value != SECRET and SECRET not in entry.value
    assert crypto.decrypt(entry.value) == SECRET
    assert entry.updated_by == "admin"


def test_new_secret_value_replaces_the_secret_and_empty_keeps_it(admin_client, secret_entry):
    url = _url(secret_entry, "change")
    assert admin_client.post(url, {"new_secret_value": ""}).status_code == 302
    secret_entry.refresh_from_db()
    assert crypto.decrypt(secret_entry.value) == SECRET and secret_entry.version == 1

    assert admin_client.post(url, {"new_secret_value": "rotated-value-123"}).status_code == 302
    secret_entry.refresh_from_db()
    assert crypto.decrypt(secret_entry.value) == "rotated-value-123"
    assert secret_entry.version == 2


def test_rejected_form_does_not_echo_the_secret(admin_client, main_team, secret_entry):
    # Same team and key as an existing entry: refused, and the typed secret is not rendered.
    response = admin_client.post(
        ADD_URL + "add/",
        {"team": main_team.pk, "key": "DB_PASSWORD", "value": "", "new_secret_value": "typed-1234"},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "already exists" in html
    assert "typed-1234" not in html


def test_plain_and_secret_value_together_are_refused(admin_client, main_team):
    response = admin_client.post(
        ADD_URL + "add/",
        {"team": main_team.pk, "key": "X", "value": "plain", "new_secret_value": "s3cret-xyz"},
    )
    assert response.status_code == 200
    assert "not both" in response.content.decode()
    assert not VaultEntry.objects.filter(key="X").exists()


def test_empty_entry_is_refused(admin_client, main_team):
    response = admin_client.post(ADD_URL + "add/", {"team": main_team.pk, "key": "X"})
    assert response.status_code == 200
    assert not VaultEntry.objects.filter(key="X").exists()


def test_plain_entry_shows_and_edits_its_value(admin_client, main_team):
    entry = VaultEntryFactory(team=main_team, key="region", value="eu-west-1")
    assert "eu-west-1" in admin_client.get(ADD_URL).content.decode()
    response = admin_client.post(_url(entry, "change"), {"value": "us-east-2"})
    assert response.status_code == 302
    entry.refresh_from_db()
    assert entry.value == "us-east-2" and not entry.is_secret
    assert entry.version == 2 and entry.updated_by == "admin"


def test_plain_entry_becomes_a_secret_through_the_write_only_field(admin_client, main_team):
    entry = VaultEntryFactory(team=main_team, key="token", value="old")
    response = admin_client.post(
        _url(entry, "change"), {"value": "old", "new_secret_value": "brand-new-secret"}
    )
    assert response.status_code == 302
    entry.refresh_from_db()
    assert entry.is_secret and crypto.decrypt(entry.value) == "brand-new-secret"
    assert "brand-new-secret" not in admin_client.get(_url(entry, "change")).content.decode()

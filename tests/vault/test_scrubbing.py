"""Secrets at rest and in flight: the scrubber, the logging filter, encryption and the vault."""

from __future__ import annotations

import json
import logging

import pytest
import yaml
from cryptography.fernet import Fernet

from openhive.core import scrubbing
from openhive.core.scrubbing import REDACTED, Scrubber, ScrubSecretsFilter, get_scrubber
from tests.factories import TeamFactory
from vault import crypto
from vault.models import VaultEntry
from vault.selectors import vault_keys, vault_secret_values
from vault.services import vault_store_secret

SECRET = "hunter2-correct-horse"


# --- Scrubber -------------------------------------------------------------------------------


def test_known_secret_is_replaced_everywhere_in_a_text():
    scrubber = Scrubber([SECRET])
    assert scrubber.text(f"a {SECRET} b {SECRET}") == f"a {REDACTED} b {REDACTED}"


def test_short_values_are_not_treated_as_secrets():
    scrubber = Scrubber(["abc", "1234567"])
    assert scrubber.secrets == []
    assert scrubber.text("abc 1234567") == "abc 1234567"


def test_min_length_can_be_lowered_for_values_known_to_be_secret():
    assert Scrubber(["pa55wd", ""], min_length=1).text("pw pa55wd") == f"pw {REDACTED}"


def test_remembered_values_are_scrubbed_at_once_without_a_reload():
    scrubbing.remember(["remembered-value-1"])
    assert scrubbing.cached_scrubber().text("x remembered-value-1") == f"x {REDACTED}"


def test_longer_secret_containing_a_shorter_one_is_replaced_whole():
    scrubber = Scrubber(["password1", "password1-extended"])
    assert scrubber.text("x password1-extended y") == f"x {REDACTED} y"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-abcdefghijklmnopqrstuvwxyz0123 end", f"key {REDACTED} end"),
        ("Authorization: Bearer abc.def-ghi_123", f"Authorization: Bearer {REDACTED}"),
        ("GET /x?token=abcd1234efgh&y=1", f"GET /x?token={REDACTED}&y=1"),
        ('api_key: "zzzzyyyyxxxx"', f'api_key: "{REDACTED}"'),
        ("API-KEY=qwertyuiop", f"API-KEY={REDACTED}"),
    ],
)
def test_secret_shaped_strings_are_replaced_even_when_unknown(text, expected):
    assert Scrubber().text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # Letters that IGNORECASE matches but str.lower() writes differently (or not at all).
        "ap\u0131_key=abcdefghij",  # dotless i
        "AP\u0130-KEY: abcdefghij",  # dotted capital I, two characters once lowered
        "to\u212aen=abcdefgh1",  # the Kelvin sign, a capital K to the regex
        "BeArEr\tabcdefghijk",
        "x" * 5000 + " token=abcdefgh1",
    ],
)
def test_secret_shapes_in_unusual_letters_are_replaced_as_the_patterns_match_them(text):
    expected = text
    for pattern in scrubbing.PATTERNS:
        expected = pattern.sub(scrubbing._redact_match, expected)
    assert expected != text
    assert Scrubber().text(text) == expected
    assert Scrubber().data({"note": text}) == {"note": expected}


def test_the_quick_check_never_skips_a_string_a_pattern_matches():
    # Every pattern word, in every case and next to every character whose case-folding is odd,
    # against the patterns themselves: the check may say "maybe" too often, never "no" wrongly.
    odd = ["\u0130", "\u0131", "\u212a", "\u017f", "\u0307", "K", "k", "I", "_", "-", ""]
    words = ["sk-" + "a" * 20, "bearer abcdefgh", "token=abcdefgh", "apikey=abcdefgh"]
    words += ["api_key: abcdefgh", "api-key=abcdefgh"]
    for word in words:
        for variant in {word, word.upper(), word.title(), word.swapcase()}:
            for i in range(len(variant) + 1):
                for extra in odd:
                    for text in (variant[:i] + extra + variant[i:], variant[:i] + extra):
                        text = text.replace("i", extra) if extra in ("\u0130", "\u0131") else text
                        if any(p.search(text) for p in scrubbing.PATTERNS):
                            assert scrubbing._may_match_patterns(text, text.lower()), text


def test_ordinary_text_is_left_alone():
    text = "The token bucket refills every 10 seconds; see the api key docs."
    assert Scrubber([SECRET]).text(text) == text


def test_data_scrubs_nested_strings_and_sensitive_keys():
    scrubber = Scrubber([SECRET])
    data = {
        "note": f"uses {SECRET}",
        "items": [SECRET, 3, None, {"deep": SECRET}],
        "credentials": [{"key": "API_TOKEN", "value": "short"}],
        "password": "pw",
        "Token": {"name": "gh", "value": "whatever-it-is"},
        "count": 2,
    }
    assert scrubber.data(data) == {
        "note": f"uses {REDACTED}",
        "items": [REDACTED, 3, None, {"deep": REDACTED}],
        "credentials": [{"key": "API_TOKEN", "value": REDACTED}],
        "password": REDACTED,
        "Token": {"name": "gh", "value": REDACTED},
        "count": 2,
    }


def test_sensitive_values_are_harvested_from_arguments():
    data = {
        "init_context": "free text",
        "credentials": [{"key": "A", "value": "first-value"}, {"key": "B", "value": "second"}],
        "nested": {"api_key": "third-value"},
    }
    assert scrubbing.sensitive_values(data) == ["first-value", "second", "third-value"]


def test_with_extra_adds_secrets_without_changing_the_original():
    base = Scrubber([SECRET])
    extended = base.with_extra(["another-secret-1"])
    assert extended.text("another-secret-1") == REDACTED
    assert base.text("another-secret-1") == "another-secret-1"
    assert extended.text(SECRET) == REDACTED


TRICKY = [
    "pässwörd-Ωμέγα-密码-42",
    'tok"en\'with"quo"tes-9',
    "C:\\vault\\key\\n0\\t-77\\",
    'ä"\\ß2k9Z',  # exactly MIN_SECRET_LENGTH characters
    "line-one\nline\ttwo\x01",
]


@pytest.mark.parametrize("secret", TRICKY)
def test_a_secret_is_found_in_its_json_and_repr_forms(secret):
    scrubber = Scrubber([secret])
    for written in (
        json.dumps({"value": secret}),
        json.dumps({"value": secret}, ensure_ascii=False),
        json.dumps(json.dumps({"value": secret})),
        f"logged {secret!r}",
    ):
        assert secret not in scrubber.text(written)
        assert REDACTED in scrubber.text(written), written


@pytest.mark.parametrize("secret", TRICKY)
def test_a_json_text_is_scrubbed_as_the_structure_it_encodes(secret):
    result = json.dumps({"success": True, "value": secret, "n": 1}, default=str)
    scrubbed = Scrubber([secret]).data({"role": "tool", "content": result})
    assert json.loads(scrubbed["content"]) == {"success": True, "value": REDACTED, "n": 1}


def test_a_json_text_with_a_sensitive_key_loses_its_value_without_known_secrets():
    content = json.dumps({"credentials": [{"key": "K", "value": "anything-at-all"}]})
    scrubbed = Scrubber().data([content])[0]
    assert json.loads(scrubbed) == {"credentials": [{"key": "K", "value": REDACTED}]}


def test_a_json_text_without_secrets_is_left_byte_for_byte():
    content = '{"b":1,  "a": "plain"}'
    assert Scrubber(["some-secret-1"]).data(content) == content


# --- the live scrubber --------------------------------------------------------------------


@pytest.mark.django_db
def test_live_scrubber_knows_vault_secrets(main_team, vault_key):
    team = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=team, key="API_TOKEN", value=SECRET, updated_by="main")
    assert get_scrubber().text(f"token {SECRET}") == f"token {REDACTED}"


@pytest.mark.django_db
def test_live_scrubber_knows_provider_keys(openhive_dirs, monkeypatch):
    monkeypatch.setenv("ZZ_TEST_PROVIDER_KEY", "env-provider-key-123")
    (openhive_dirs / "data" / "config" / "providers.yaml").write_text(
        yaml.safe_dump(
            {
                "profiles": {
                    "default": {"model": "openai/gpt-4.1-mini", "api_key": "plain-key-0987654"},
                    "fast": {"model": "openai/x", "api_key_env": "ZZ_TEST_PROVIDER_KEY"},
                }
            }
        )
    )
    scrubber = get_scrubber(refresh=True)
    assert scrubber.text("plain-key-0987654 env-provider-key-123") == f"{REDACTED} {REDACTED}"


@pytest.mark.django_db
def test_live_scrubber_is_cached_until_invalidated(main_team, vault_key, monkeypatch):
    calls = []
    real = scrubbing._load_secret_values

    def counting():
        calls.append(1)
        return real()

    monkeypatch.setattr(scrubbing, "_load_secret_values", counting)
    scrubbing.invalidate()
    get_scrubber()
    get_scrubber()
    assert len(calls) == 1
    scrubbing.invalidate()
    get_scrubber()
    assert len(calls) == 2


# --- the logging filter ----------------------------------------------------------------------


def _record(msg, *args, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("t", logging.ERROR, __file__, 1, msg, args, exc_info)


@pytest.mark.django_db
def test_log_filter_scrubs_formatted_messages_and_tracebacks(main_team, vault_key):
    team = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=team, key="API_TOKEN", value=SECRET, updated_by="main")
    get_scrubber(refresh=True)
    try:
        raise ValueError(f"bad {SECRET}")
    except ValueError:
        import sys

        record = _record("value %s and %d", SECRET, 3, exc_info=sys.exc_info())
    assert ScrubSecretsFilter().filter(record) is True
    assert record.getMessage() == f"value {REDACTED} and 3"
    assert SECRET not in record.exc_text
    assert "ValueError: bad [REDACTED]" in record.exc_text


@pytest.mark.django_db
def test_log_filter_knows_a_secret_as_soon_as_it_is_stored(main_team, vault_key, caplog):
    logger = logging.getLogger("zz.test.scrub")
    caplog.handler.addFilter(ScrubSecretsFilter())
    get_scrubber(refresh=True)  # the cache is warm and does not know the secret yet
    team = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=team, key="API_TOKEN", value=SECRET, updated_by="main")
    with caplog.at_level(logging.INFO, logger="zz.test.scrub"):
        logger.info("just stored %s", SECRET)
    assert caplog.messages == [f"just stored {REDACTED}"]
    assert SECRET not in caplog.text


def test_log_filter_survives_a_malformed_log_call():
    record = _record("needs two %s %s", "one")
    assert ScrubSecretsFilter().filter(record) is True


def test_log_filter_scrubs_secret_shapes_without_the_database():
    record = _record("calling with Bearer abcdefghijkl")
    ScrubSecretsFilter().filter(record)
    assert record.getMessage() == f"calling with Bearer {REDACTED}"


# --- encryption at rest ----------------------------------------------------------------------


def test_encrypt_round_trips_and_never_stores_the_plaintext(vault_key):
    ciphertext = crypto.encrypt(SECRET)
    assert SECRET not in ciphertext
    assert crypto.decrypt(ciphertext) == SECRET


def test_rotated_keys_still_decrypt_old_ciphertext_and_encrypt_with_the_new_key(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    try:
        settings.VAULT_KEYS = [old]
        crypto.reset_keys()
        before = crypto.encrypt(SECRET)
        settings.VAULT_KEYS = [new, old]
        crypto.reset_keys()
        assert crypto.decrypt(before) == SECRET
        after = crypto.encrypt(SECRET)
        assert Fernet(new.encode()).decrypt(after.encode()).decode() == SECRET
        settings.VAULT_KEYS = [new]
        crypto.reset_keys()
        with pytest.raises(ValueError, match="cannot be decrypted"):
            crypto.decrypt(before)
    finally:
        crypto.reset_keys()


def test_without_a_vault_key_a_key_is_derived_from_secret_key(settings, caplog):
    settings.VAULT_KEYS = []
    crypto.reset_keys()
    try:
        with caplog.at_level(logging.WARNING, logger="vault.crypto"):
            ciphertext = crypto.encrypt(SECRET)
        assert crypto.decrypt(ciphertext) == SECRET
        assert any("OPENHIVE_VAULT_KEY is not set" in m for m in caplog.messages)
    finally:
        crypto.reset_keys()


# --- the vault ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_stored_secret_is_ciphertext_in_the_database(main_team, vault_key):
    team = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=team, key="API_TOKEN", value=SECRET, updated_by="main")
    raw = VaultEntry.objects.values_list("value", flat=True).get(team=team, key="API_TOKEN")
    assert SECRET not in raw
    assert crypto.decrypt(raw) == SECRET


@pytest.mark.django_db
def test_storing_a_secret_again_replaces_it_and_bumps_the_version(main_team, vault_key):
    team = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=team, key="API_TOKEN", value=SECRET, updated_by="main")
    entry = vault_store_secret(team=team, key="API_TOKEN", value="new-value-1234", updated_by="x")
    entry.refresh_from_db()
    assert entry.version == 2 and entry.updated_by == "x" and entry.is_secret
    assert VaultEntry.objects.filter(team=team).count() == 1
    assert vault_secret_values(team=team) == ["new-value-1234"]


@pytest.mark.django_db
def test_secret_values_skip_rows_that_cannot_be_decrypted(main_team, vault_key):
    team = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=team, key="GOOD", value=SECRET, updated_by="main")
    VaultEntry.objects.create(team=team, key="BROKEN", value="not-a-token", is_secret=True)
    assert vault_secret_values() == [SECRET]


@pytest.mark.django_db
def test_vault_keys_never_return_secret_values(main_team, vault_key):
    team = TeamFactory(name="ops", parent=main_team)
    vault_store_secret(team=team, key="API_TOKEN", value=SECRET, updated_by="main")
    VaultEntry.objects.create(team=team, key="state", value="plain state")
    listed = {e["key"]: e for e in vault_keys(team=team)}
    assert listed["API_TOKEN"]["value"] is None and listed["API_TOKEN"]["is_secret"]
    assert listed["state"]["value"] == "plain state"
    assert SECRET not in repr(listed)

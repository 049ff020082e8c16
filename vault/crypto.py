"""Encryption at rest for vault secrets: MultiFernet, so keys can be rotated (the first key
encrypts, every key decrypts)."""

import base64
import hashlib
import logging
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

logger = logging.getLogger(__name__)


def _derived_key() -> str:
    digest = hashlib.sha256(("openhive-vault:" + settings.SECRET_KEY).encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


def configured_keys() -> list[str]:
    return [k.strip() for k in settings.VAULT_KEYS if k.strip()]


@lru_cache(maxsize=1)
def _fernet() -> MultiFernet:
    keys = configured_keys()
    if not keys:
        logger.warning(
            "OPENHIVE_VAULT_KEY is not set: vault secrets are encrypted with a key derived from "
            "SECRET_KEY. Set OPENHIVE_VAULT_KEY so that rotating SECRET_KEY cannot lock them."
        )
    # The derived key always decrypts last, so moving from it to an explicit key is one
    # `rotate-vault-key` away; with an explicit key it never encrypts.
    keys = [*keys, _derived_key()] if _derived_key() not in keys else keys
    return MultiFernet([Fernet(k.encode()) for k in keys])


def reset_keys() -> None:
    _fernet.cache_clear()


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(ciphertext: str) -> str:
    try:
        return _fernet().decrypt(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("vault secret cannot be decrypted with the configured keys") from exc


def rotate(ciphertext: str) -> str:
    """The same secret, encrypted with the first (newest) key."""
    try:
        return _fernet().rotate(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("vault secret cannot be decrypted with the configured keys") from exc


def validate_key(key: str) -> None:
    try:
        Fernet(key.encode())
    except (ValueError, TypeError) as exc:
        raise ValueError(
            "not a Fernet key (32 url-safe base64-encoded bytes); generate one with "
            "`manage.py openhive rotate-vault-key --generate`"
        ) from exc

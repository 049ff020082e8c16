"""Encryption at rest for vault secrets: MultiFernet, so keys can be rotated (the first key
encrypts, every key decrypts)."""

import base64
import hashlib
import logging
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

logger = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _fernet() -> MultiFernet:
    keys = [k.strip() for k in settings.VAULT_KEYS if k.strip()]
    if not keys:
        logger.warning(
            "OPENHIVE_VAULT_KEY is not set: vault secrets are encrypted with a key derived from "
            "SECRET_KEY. Set OPENHIVE_VAULT_KEY so that rotating SECRET_KEY cannot lock them."
        )
        digest = hashlib.sha256(("openhive-vault:" + settings.SECRET_KEY).encode()).digest()
        keys = [base64.urlsafe_b64encode(digest).decode()]
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

"""API tokens: created for a Django user, stored only as a SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from openhive.errors import NotFound

from .models import ApiToken

TOKEN_PREFIX = "ohk_"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(*, username: str, name: str = "") -> tuple[ApiToken, str]:
    """Returns the row and the plain token, which is never stored and never shown again."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f'user "{username}" not found; create it with `manage.py createsuperuser`')
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user, name=name, prefix=token[: len(TOKEN_PREFIX) + 4], token_hash=_digest(token)
    )
    return row, token


def api_token_authenticate(token: str) -> AbstractBaseUser | None:
    if not token or not token.startswith(TOKEN_PREFIX):
        return None
    row = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=_digest(token), revoked=False, user__is_active=True)
        .first()
    )
    if row is None:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row.user


def api_token_revoke(*, token_id: int) -> None:
    if not ApiToken.objects.filter(pk=token_id).update(revoked=True):
        raise NotFound(f"token {token_id} not found")

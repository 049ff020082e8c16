"""Authentication for the REST API: a bearer token (trust.ApiToken) or a staff user's session."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja.security import APIKeyCookie, HttpBearer

from trust.services import api_token_authenticate


class BearerTokenAuth(HttpBearer):
    """`Authorization: Bearer ohk_…`; only the token's digest is looked up."""

    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        return api_token_authenticate(token.strip())


def _is_staff(user: Any) -> bool:
    return bool(
        user is not None
        and user.is_authenticated
        and user.is_active
        and getattr(user, "is_staff", False)
    )


class StaffSessionAuth(APIKeyCookie):
    """The admin's session cookie, for staff users only. Unsafe methods need a CSRF token, as
    anywhere else in Django, because a browser sends the cookie on cross-site requests too."""

    param_name: str = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        # Ninja's cookie auth checks CSRF before it knows whether there is a session at all, so
        # a request with neither token nor session would get "403 CSRF" instead of 401.
        if not _is_staff(getattr(request, "user", None)):
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any | None:
        if key and _is_staff(request.user):
            return request.user
        return None


api_auth = [BearerTokenAuth(), StaffSessionAuth()]


def authenticated(request: HttpRequest) -> Any | None:
    """The user behind a token or staff session, or None (outside ninja's own operations)."""
    return next((user for auth in api_auth if (user := auth(request))), None)


def docs_guard(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The docs and schema are for API users too: a browser without a session is sent to the
    admin login (and back), a script without a token gets the usual 401."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            response = JsonResponse({"detail": "Method not allowed (allowed: GET)"}, status=405)
            response["Allow"] = "GET"
            return response
        if authenticated(request) is not None:
            return view(request, *args, **kwargs)
        if "text/html" in request.headers.get("Accept", ""):
            return redirect_to_login(request.get_full_path())
        return JsonResponse({"detail": "Unauthorized"}, status=401)

    # Read-only pages: other methods are refused above, with JSON rather than Django's CSRF page.
    wrapper.csrf_exempt = True  # type: ignore[attr-defined]
    return wrapper

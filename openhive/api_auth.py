"""Authentication for the REST API: a bearer token (trust.ApiToken) or a staff user's session."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja.security import APIKeyCookie, HttpBearer

from openhive.core.errors import NotAllowed
from trust.services import OPERATOR, ApiIdentity, api_token_identify

OPERATOR_ONLY = (
    "this operation needs operator rights: a staff user's token or staff session, or a token "
    "created with `manage.py openhive token create <user> --scope operator`. This token can "
    "chat and read its own topics."
)


class BearerTokenAuth(HttpBearer):
    """`Authorization: Bearer ohk_…`; only the token's digest is looked up. A token without
    the rights an operation needs is refused with 403 (it is known, just not allowed)."""

    def __init__(self, *, operator: bool = True) -> None:
        super().__init__()
        self.operator = operator

    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        identity = api_token_identify(token.strip())
        if identity is None:
            return None
        request.api_identity = identity  # type: ignore[attr-defined]
        if self.operator and not identity.is_operator:
            raise NotAllowed(OPERATOR_ONLY, code="operator_only")
        return identity.user


def unauthorized_detail(request: HttpRequest) -> dict:
    """The 401 answer: what to send, and (when a credential came) why it did not count. The
    token itself is never echoed."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.strip().partition(" ")
    if header and scheme.lower() == "bearer" and value.strip():
        detail = (
            "this API token is not valid (unknown, revoked or expired); create one with "
            "`manage.py openhive token create <user>`"
        )
        code = "invalid_token"
    elif header:
        detail = (
            "the Authorization header must be `Authorization: Bearer <token>` "
            "(create a token with `manage.py openhive token create <user>`)"
        )
        code = "bad_authorization_header"
    else:
        detail = (
            "not authenticated: send `Authorization: Bearer <token>` (create a token with "
            "`manage.py openhive token create <user>`), or log in to the admin as a staff user"
        )
        code = "not_authenticated"
    return {"detail": detail, "code": code}


def unauthorized_response(request: HttpRequest) -> JsonResponse:
    response = JsonResponse(unauthorized_detail(request), status=401)
    response["WWW-Authenticate"] = 'Bearer realm="openhive"'
    return response


def _is_staff(user: Any) -> bool:
    return bool(
        user is not None
        and user.is_authenticated
        and user.is_active
        and getattr(user, "is_staff", False)
    )


class StaffSessionAuth(APIKeyCookie):
    """The admin's session cookie, for staff users only (operator rights). Unsafe methods need
    a CSRF token, as anywhere else in Django, because a browser sends the cookie on cross-site
    requests too."""

    param_name: str = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        # Ninja's cookie auth checks CSRF before it knows whether there is a session at all, so
        # a request with neither token nor session would get "403 CSRF" instead of 401.
        if not _is_staff(getattr(request, "user", None)):
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any | None:
        if key and _is_staff(request.user):
            request.api_identity = ApiIdentity(request.user, OPERATOR)  # type: ignore[attr-defined]
            return request.user
        return None


# Every operation needs operator rights unless its router says otherwise.
api_auth = [BearerTokenAuth(), StaffSessionAuth()]
# Operations any identity may call (the chat user's own topics): each filters by caller.
member_auth = [BearerTokenAuth(operator=False), StaffSessionAuth()]


def authenticated(request: HttpRequest) -> Any | None:
    """The user behind a token or staff session, or None (outside ninja's own operations)."""
    return next((user for auth in member_auth if (user := auth(request))), None)


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
        return unauthorized_response(request)

    # Read-only pages: other methods are refused above, with JSON rather than Django's CSRF page.
    wrapper.csrf_exempt = True  # type: ignore[attr-defined]
    return wrapper

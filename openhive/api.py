"""The REST API root: /api/v1/. Each app contributes a router; this module owns authentication,
the health probe and the error contract: every 4xx is JSON `{"detail": ...}`."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Literal

from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, URLResolver
from ninja import NinjaAPI, Router, Schema, Status

from memory.api import router as memories_router
from memory.embeddings import search_mode as memory_search_mode
from openhive.api_auth import api_auth, docs_guard
from openhive.chat.api import router as topics_router
from openhive.engine.api import audit_router, overview_router
from openhive.engine.api import router as sessions_router
from openhive.engine.providers import providers_configured
from openhive.errors import Conflict, DomainError, NotAllowed, NotFound
from tasks.api import router as tasks_router
from teams.api import router as teams_router
from teams.models import Team
from triggers.api import router as triggers_router
from trust.api import router as trust_router
from vault.api import router as vault_router
from vault.scrubbing import scrub

logger = logging.getLogger(__name__)

VERSION = "0.1.0"  # keep in step with pyproject.toml


def _json_errors(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Ninja answers a wrong method with a plain-text 405 and its root URL with Django's HTML
    404; wrap every API view so those keep the JSON error contract too."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            response = view(request, *args, **kwargs)
        except Http404:
            return JsonResponse({"detail": "Not Found"}, status=404)
        if response.status_code == 405 and "json" not in response.get("Content-Type", ""):
            allowed = response.get("Allow", "")
            response = JsonResponse(
                {"detail": f"Method not allowed (allowed: {allowed})"}, status=405
            )
            response["Allow"] = allowed
        return response

    return wrapper


class OpenHiveAPI(NinjaAPI):
    def _get_urls(self) -> list[URLPattern | URLResolver]:
        urls = super()._get_urls()
        for pattern in urls:
            if isinstance(pattern, URLPattern):
                pattern.callback = _json_errors(pattern.callback)
        return urls


api = OpenHiveAPI(
    title="OpenHive API",
    version="1",
    description="Bearer token (`manage.py openhive token create <user>`) or a staff session.",
    urls_namespace="api-v1",
    auth=api_auth,
    docs_decorator=docs_guard,
)

_DOMAIN_STATUS: list[tuple[type[DomainError], int]] = [
    (NotFound, 404),
    (Conflict, 409),
    (NotAllowed, 403),
]


@api.exception_handler(DomainError)
def domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    status = next((code for cls, code in _DOMAIN_STATUS if isinstance(exc, cls)), 400)
    # Messages can quote user input or configuration; never let them carry a secret out.
    return api.create_response(
        request, {"detail": scrub(exc.message), "code": exc.code}, status=status
    )


class HealthOut(Schema):
    status: Literal["ok", "error"]
    database: Literal["ok", "error"]
    provider_configured: bool
    memory_search: Literal["hybrid", "full_text_only"]
    version: str


def _provider_configured() -> bool:
    try:
        return providers_configured()
    except Exception:  # an unreadable providers.yaml must not turn the probe into a 500
        logger.warning("health: provider configuration unreadable", exc_info=True)
        return False


def _database_ok() -> bool:
    try:
        Team.objects.exists()
    except DatabaseError:
        logger.warning("health: database query failed", exc_info=True)
        return False
    return True


@api.get("/health", auth=None, response={200: HealthOut, 503: HealthOut}, tags=["health"])
def health(request: HttpRequest) -> Status:
    database_ok = _database_ok()
    body = {
        "status": "ok" if database_ok else "error",
        "database": "ok" if database_ok else "error",
        "provider_configured": _provider_configured(),
        "memory_search": memory_search_mode(),
        "version": VERSION,
    }
    return Status(200 if database_ok else 503, body)


api.add_router("/teams", teams_router)
api.add_router("/tasks", tasks_router)
api.add_router("/sessions", sessions_router)
api.add_router("/audit", audit_router)
api.add_router("/overview", overview_router)
api.add_router("/triggers", triggers_router)
api.add_router("/memories", memories_router)
api.add_router("/vault", vault_router)
api.add_router("/trust", trust_router)
api.add_router("/topics", topics_router)

# Registered last, so it only sees paths no other route matched.
fallback = Router()


@fallback.api_operation(
    ["GET", "POST", "PUT", "PATCH", "DELETE"], "/{path:path}", auth=None, include_in_schema=False
)
def unknown_path(request: HttpRequest, path: str) -> HttpResponse:
    return api.create_response(
        request, {"detail": "no such endpoint (see /api/v1/docs)"}, status=404
    )


api.add_router("", fallback)

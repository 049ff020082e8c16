"""The REST API root: /api/v1/. Each app contributes a router; this module owns authentication,
the health probe and the error contract: every 4xx is JSON `{"detail": ...}`."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any, Literal

from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, URLResolver
from ninja import Field, NinjaAPI, Query, Router, Schema, Status
from ninja.errors import AuthenticationError
from ninja.openapi.docs import ABS_TPL_PATH, Swagger

from evolution.api import router as learning_router
from memory.api import router as memories_router
from memory.embeddings import search_mode as memory_search_mode
from openhive.api_auth import api_auth, docs_guard, member_auth, unauthorized_response
from openhive.chat.api import router as topics_router
from openhive.config_report import config_problems
from openhive.core.api import Instant
from openhive.core.errors import Conflict, DomainError, NotAllowed, NotFound
from openhive.core.scrubbing import scrub
from openhive.core.text import UnstorableText, check_storable
from openhive.engine.api import audit_router
from openhive.engine.api import router as sessions_router
from openhive.engine.providers import provider_problems, providers_configured
from openhive.engine.selectors import engine_leader, engine_overview
from openhive.org.api import router as teams_router
from openhive.usage import usage_report
from tasks.api import router as tasks_router
from tasks.selectors import task_counts_by_status
from teams.selectors import team_count
from triggers.api import router as triggers_router
from trust.api import router as trust_router
from vault.api import router as vault_router

logger = logging.getLogger(__name__)

VERSION = "0.1.0"  # keep in step with pyproject.toml


def _json_errors(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Ninja answers a wrong method with a plain-text 405 and its root URL with Django's HTML
    404; wrap every API view so those keep the JSON error contract too."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = _unstorable_input(request)
        if refused:
            return JsonResponse({"detail": refused, "code": "invalid_text"}, status=400)
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


def _unstorable_input(request: HttpRequest) -> str:
    """A NUL or a lone surrogate anywhere in the path, the query or a JSON body: refused with
    400 on both databases (PostgreSQL cannot store either; SQLite would)."""
    parts: dict[str, Any] = {
        "the path": request.path,
        "the query": {key: request.GET.getlist(key) for key in request.GET},
    }
    if request.body and "json" in request.content_type:
        try:
            parts["the body"] = json.loads(request.body)
        except ValueError:
            pass  # ninja answers malformed JSON itself
        except RecursionError:
            return "the body is nested too deeply"
    try:
        for where, value in parts.items():
            check_storable(value, where)
    except UnstorableText as exc:
        return f"{exc}; send plain text"
    return ""


ERROR_SCHEMA = {
    "title": "Error",
    "type": "object",
    "properties": {
        "detail": {
            "title": "Detail",
            "description": "what was wrong: a sentence, or (422) a list of field errors",
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}],
        },
        "code": {"title": "Code", "type": "string", "description": "a stable lower-case code"},
    },
    "required": ["detail"],
}
ERROR_ANSWERS = {
    400: "Refused input: a rule the value breaks (named in `detail`), or text no database "
    "stores (a NUL character, an unpaired surrogate, JSON nested too deeply)",
    401: "No identity: send `Authorization: Bearer <token>` or use a staff session",
    403: "Not allowed: operator operations need a staff user or a token with the operator scope",
    404: "Something the request names does not exist (or is not yours to see)",
    409: "Conflicts with the current state (named in `detail`)",
    422: "The request does not match this schema (field errors in `detail`)",
}
# Operations any identity may call (the chat user's own topics): no 403 for them.
MEMBER_PREFIXES = ("/api/v1/topics",)


def document_errors(schema: dict) -> dict:
    """Every operation documents the 4xx answers it can give, with one error shape."""
    schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            if not operation.get("security"):  # the open health probe
                continue
            codes = {400, 401, 404}
            if not path.startswith(MEMBER_PREFIXES):
                codes.add(403)
            if method != "get":
                codes.add(409)
            if operation.get("parameters") or operation.get("requestBody"):
                codes.add(422)
            responses = operation.setdefault("responses", {})
            for code in sorted(codes):
                responses.setdefault(
                    code,
                    {
                        "description": ERROR_ANSWERS[code],
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                        },
                    },
                )
    return schema


class OpenHiveAPI(NinjaAPI):
    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        return document_errors(super().get_openapi_schema(*args, **kwargs))

    def _get_urls(self) -> list[URLPattern | URLResolver]:
        urls = super()._get_urls()
        for pattern in urls:
            if isinstance(pattern, URLPattern):
                pattern.callback = _json_errors(pattern.callback)
        return urls


class LocalSwagger(Swagger):
    """The docs page with the Swagger UI files this server serves itself, never a CDN: ninja
    picks its CDN page unless the literal "ninja" is in INSTALLED_APPS, and the assets are
    listed there as `NinjaAssetsConfig` (openhive/ninja_assets.py says why)."""

    template_cdn = str(ABS_TPL_PATH / "swagger.html")


api = OpenHiveAPI(
    title="OpenHive API",
    version="1",
    description="Bearer token (`manage.py openhive token create <user>`) or a staff session.",
    urls_namespace="api-v1",
    auth=api_auth,
    docs=LocalSwagger(),
    docs_decorator=docs_guard,
)

_DOMAIN_STATUS: list[tuple[type[DomainError], int]] = [
    (NotFound, 404),
    (Conflict, 409),
    (NotAllowed, 403),
]


@api.exception_handler(AuthenticationError)
def not_authenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    # Ninja's bare "Unauthorized" does not say what to send.
    return unauthorized_response(request)


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
    # Configuration that cannot be used, by file, part and key (providers.yaml profiles,
    # channels.yaml, the teams' config.yaml): the rest keeps working.
    config_problems: list[str]
    version: str


def _provider_configured() -> bool:
    try:
        return providers_configured()
    except Exception:  # an unreadable providers.yaml must not turn the probe into a 500
        logger.warning("health: provider configuration unreadable", exc_info=True)
        return False


def _database_ok() -> bool:
    try:
        team_count()
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
        "config_problems": config_problems() if database_ok else provider_problems(),
        "version": VERSION,
    }
    return Status(200 if database_ok else 503, body)


api.add_router("/teams", teams_router)
api.add_router("/tasks", tasks_router)
api.add_router("/sessions", sessions_router)
api.add_router("/audit", audit_router)
api.add_router("/triggers", triggers_router)
api.add_router("/memories", memories_router)
api.add_router("/vault", vault_router)
api.add_router("/trust", trust_router)
api.add_router("/learning", learning_router)
# A chat user reads their own topics here; everything else is for operators.
api.add_router("/topics", topics_router, auth=member_auth)


class OverviewOut(Schema):
    teams: int
    tasks: dict[str, int]
    sessions: int
    tokens: dict[str, int]
    tool_calls: dict[str, int]
    provider_configured: bool
    engine_leader: str | None


@api.get(
    "/overview", response=OverviewOut, summary="Counts and health at a glance", tags=["overview"]
)
def overview(request: HttpRequest) -> dict:
    leader = engine_leader()
    return {
        "teams": team_count(),
        "tasks": task_counts_by_status(),
        **engine_overview(),
        "provider_configured": _provider_configured(),
        "engine_leader": leader.holder if leader else None,
    }


class UsageFilters(Schema):
    since: Instant | None = None
    until: Instant | None = None
    team: str | None = Field(None, min_length=1, max_length=64)


@api.get(
    "/usage",
    summary="Tokens and dollars by team, task, trigger and day, each beside its budget",
    tags=["usage"],
)
def usage(request: HttpRequest, filters: Query[UsageFilters]) -> dict:
    """Default period: today so far (the deployment's TZ), the period daily budgets count."""
    since, until = filters.since, filters.until
    if since is not None and until is not None and since >= until:
        raise DomainError("since must be before until", code="invalid_period")
    return usage_report(since=since, until=until, team=filters.team)


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

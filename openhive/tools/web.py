"""`web_fetch`: an HTTP request on a team's behalf, behind the SSRF guard.

Per hop: the guard checks the URL (scheme, userinfo, the team's domain allowlist, every
resolved address), the team's token buckets are charged, and the request goes to the checked
address only (pinned connection). Redirects are followed here, by hand, at most 5, each hop
checked again; credentials never follow a redirect to another origin. Header values may name a
vault entry (`{{vault:key}}`): it is read at the moment of the request and its value is
scrubbed from everything the tool returns or stores."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import DomainError, NotFound
from openhive.core.registry import tool
from openhive.core.scrubbing import get_scrubber
from teams.config import load_team_config
from vault.services import vault_read

DEFAULT_TIMEOUT = 30
MAX_TIMEOUT = 60
MAX_REQUEST_BODY_CHARS = 1024 * 1024
_VAULT_REF = re.compile(r"\{\{\s*vault:([A-Za-z0-9_.\-]{1,200})\s*\}\}")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}$")
# Set by the tool itself, or meaningless across a guarded hop.
_FORBIDDEN_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "accept-encoding", "upgrade"}
)


class Header(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Header name, e.g. Authorization")
    value: str = Field(description="Value; `{{vault:key}}` inserts a vault entry at send time")


class WebFetchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=8192, description="http(s) URL to fetch")
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] = Field(
        default="GET", description="HTTP method"
    )
    headers: list[Header] = Field(default_factory=list, description="Request headers")
    body: str | None = Field(default=None, description="Request body (text, e.g. JSON)")
    rate_limit_key: str | None = Field(
        default=None, description="Name of a rate-limit bucket from your team's config"
    )
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT, ge=1, le=MAX_TIMEOUT, description="Whole-request time limit"
    )
    raw: bool = Field(
        default=False, description="Return HTML as-is instead of converted to readable text"
    )


@tool(
    name="web_fetch",
    description=(
        "Fetch a public web page or API over http(s). HTML comes back as readable text unless "
        "raw is true; bodies over 1 MiB are cut (truncated: true). Private and local addresses "
        "are refused. A header value `{{vault:key}}` sends a vault secret without showing it."
    ),
    args=WebFetchArgs,
)
def web_fetch_tool(ctx: ToolContext, args: WebFetchArgs) -> dict:
    config = load_team_config(ctx.team.name)
    headers, secrets = _resolve_headers(ctx, args.headers)
    scrubber = get_scrubber().with_extra(secrets)
    if args.body is not None and len(args.body) > MAX_REQUEST_BODY_CHARS:
        raise DomainError("the request body is over 1 MiB", code="too_large")
    # httpx and the pinned transport load on first use: most processes never fetch anything.
    from .webfetch import fetch

    try:
        return fetch(ctx, config, args, headers, scrubber)
    except DomainError as exc:
        raise type(exc)(scrubber.text(exc.message), code=exc.code) from None


def _resolve_headers(
    ctx: ToolContext, given: list[Header]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The headers with vault references replaced, and the values that came from the vault."""
    headers: list[tuple[str, str]] = []
    secrets: list[str] = []
    for header in given:
        name = header.name.strip()
        if not _HEADER_NAME.match(name):
            raise DomainError(f"invalid header name {name!r}", code="invalid_header")
        if name.lower() in _FORBIDDEN_HEADERS:
            raise DomainError(
                f"the {name} header is set by web_fetch itself", code="invalid_header"
            )

        def insert(match: re.Match[str]) -> str:
            entry = vault_read(team=ctx.team, key=match.group(1))
            if entry is None:
                raise NotFound(
                    f'vault key "{match.group(1)}" not found (vault_list shows your keys)'
                )
            secrets.append(entry.value)
            return entry.value

        value = _VAULT_REF.sub(insert, header.value)
        if "\r" in value or "\n" in value:
            raise DomainError(
                f"the {name} header value contains a line break", code="invalid_header"
            )
        headers.append((name, value))
    return headers, secrets

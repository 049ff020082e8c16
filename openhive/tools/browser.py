"""The browser tools: a real Chromium per worker, one private context per team, every request
behind the SSRF guard and the team's `browser.allowed_domains` (see `browserrouting`).

They are offered only to a team whose config has a `browser:` section: they come from a tool
source (not the declared registry), so a team without it never sees them, whatever its
allowlist. Text typed into a page may name vault entries (`{{vault:key}}`); their values are
scrubbed from everything these tools return and masked in screenshots."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import DomainError, NotFound
from openhive.core.registry import ToolSpec, register_tool_source
from openhive.core.scrubbing import get_scrubber
from teams.config import BrowserConfig, load_team_config, read_team_config
from vault.services import vault_read

from .web import _VAULT_REF
from .workspaces import team_workspace

SCREENSHOT_DIR = "browser"


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NavigateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=8192, description="http(s) URL to open")


class RefArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str = Field(min_length=1, max_length=40, description="Element ref from browser_snapshot")


class TypeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str = Field(min_length=1, max_length=40, description="Element ref from browser_snapshot")
    text: str = Field(
        max_length=10_000,
        description="Text to enter (replaces the field's content); `{{vault:key}}` types a "
        "vault secret without showing it",
    )
    submit: bool = Field(default=False, description="Press Enter afterwards")


class ScreenshotArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    full_page: bool = Field(default=False, description="The whole page, not only the viewport")


def _browser_config(ctx: ToolContext) -> BrowserConfig:
    config = load_team_config(ctx.team.name).browser
    if config is None:
        raise DomainError(
            f"the browser is not enabled for team {ctx.team.name} (its config has no browser: "
            "section)",
            code="browser_disabled",
        )
    return config


def _run(
    ctx: ToolContext, action: Callable[[Any], dict], *, create: bool = False, extra: Any = ()
) -> dict:
    from .browsermanager import browser_manager
    from .browserrouting import Policy

    config = _browser_config(ctx)
    policy = Policy(allowed_domains=list(config.allowed_domains), timeout_ms=config.timeout_ms)
    typed: set[str] = set(extra)
    try:
        result, typed = browser_manager().run(ctx.team.name, policy, action, create=create)
        typed |= set(extra)
    except DomainError as exc:
        scrubber = get_scrubber().with_extra(typed)
        raise type(exc)(scrubber.text(exc.message), code=exc.code) from None
    # Whatever a page shows (its text, title, URL) may echo what was typed into it.
    return get_scrubber().with_extra(typed).data(result)


def browser_navigate(ctx: ToolContext, args: NavigateArgs) -> dict:
    _charge_domain_buckets(ctx, args.url)
    return _run(ctx, lambda b: b.navigate(args.url), create=True)


def _charge_domain_buckets(ctx: ToolContext, url: str) -> None:
    """A rate-limit bucket the operator tied to a host (`domain:`) holds for the browser too:
    each navigation the model asks for takes one token (the page's own requests take none)."""
    import httpx

    from .webfetch import _charge

    try:
        host = httpx.URL(url).host
    except (httpx.InvalidURL, TypeError, ValueError):
        return  # the guard refuses it with a clear reason
    if host:
        _charge(ctx, load_team_config(ctx.team.name), host.lower(), None)


def browser_snapshot(ctx: ToolContext, args: NoArgs) -> dict:
    return _run(ctx, lambda b: b.snapshot())


def browser_click(ctx: ToolContext, args: RefArgs) -> dict:
    return _run(ctx, lambda b: b.click(args.ref))


def browser_type(ctx: ToolContext, args: TypeArgs) -> dict:
    secrets: list[str] = []

    def insert(match: Any) -> str:
        entry = vault_read(team=ctx.team, key=match.group(1))
        if entry is None:
            raise NotFound(f'vault key "{match.group(1)}" not found (vault_list shows your keys)')
        secrets.append(entry.value)
        return entry.value

    text = _VAULT_REF.sub(insert, args.text)
    return _run(
        ctx,
        lambda b: b.type(args.ref, text, submit=args.submit, secrets=secrets),
        extra=secrets,
    )


def browser_screenshot(ctx: ToolContext, args: ScreenshotArgs) -> dict:
    root = team_workspace(ctx).root
    name = f"screenshot-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.png"
    relative = f"{SCREENSHOT_DIR}/{name}"
    result = _run(ctx, lambda b: b.screenshot(root / relative, full_page=args.full_page))
    return {**result, "path": relative}


def browser_go_back(ctx: ToolContext, args: NoArgs) -> dict:
    return _run(ctx, lambda b: b.go_back())


def browser_go_forward(ctx: ToolContext, args: NoArgs) -> dict:
    return _run(ctx, lambda b: b.go_forward())


def browser_close(ctx: ToolContext, args: NoArgs) -> dict:
    from .browsermanager import browser_manager

    _browser_config(ctx)
    closed = browser_manager().close_team(ctx.team.name)
    return {"closed": closed}


_REFS = "Refs (e.g. e12) come from the latest browser_snapshot."
BROWSER_TOOLS = (
    ToolSpec(
        "browser_navigate",
        "Open a URL in your browser (a real Chromium; JavaScript runs). Only allowed public "
        "hosts load; refused requests are listed in blocked_requests. Then call "
        "browser_snapshot to read the page.",
        NavigateArgs,
        "daily",
        browser_navigate,
    ),
    ToolSpec(
        "browser_snapshot",
        "The current page as an accessibility tree (roles, names, text) where each element "
        "you can act on has a ref like [ref=e12].",
        NoArgs,
        "daily",
        browser_snapshot,
    ),
    ToolSpec("browser_click", f"Click an element. {_REFS}", RefArgs, "daily", browser_click),
    ToolSpec(
        "browser_type",
        f"Fill a text field, optionally pressing Enter. {_REFS} `{{{{vault:key}}}}` in the "
        "text types a vault secret; it never appears in what the tools return.",
        TypeArgs,
        "daily",
        browser_type,
    ),
    ToolSpec(
        "browser_screenshot",
        "Save a PNG of the current page in your workspace (under browser/); returns its path.",
        ScreenshotArgs,
        "daily",
        browser_screenshot,
    ),
    ToolSpec("browser_go_back", "Go back in the page history.", NoArgs, "daily", browser_go_back),
    ToolSpec(
        "browser_go_forward", "Go forward in the page history.", NoArgs, "daily", browser_go_forward
    ),
    ToolSpec(
        "browser_close",
        "Close your browser (its pages, cookies and history); the next browser_navigate starts "
        "a fresh one.",
        NoArgs,
        "daily",
        browser_close,
    ),
)
BROWSER_TOOL_NAMES = tuple(spec.name for spec in BROWSER_TOOLS)


def browser_tools_for(team: Any) -> list[ToolSpec]:
    """The browser tools, for a team whose config enables the browser; none otherwise."""
    try:
        enabled = read_team_config(team.name).browser is not None
    except DomainError:
        return []
    return list(BROWSER_TOOLS) if enabled else []


def register() -> None:
    register_tool_source("browser", browser_tools_for, prefix="browser_")

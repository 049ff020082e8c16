"""A real Chromium (Debian's, driven by Playwright) against the real `serve` process group.
Screenshots go to test-artifacts/ (git-ignored; CI keeps them as artifacts)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, Server, database_url, serve  # noqa: F401  (fixtures)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts"
USERNAME, PASSWORD = "e2e", "e2e-password-123"  # made by the serve fixture's `init`


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """Module-scoped: Playwright's sync API keeps an event loop in the main thread while it
    runs, and later tests that call asyncio.run() must not find one."""
    if not CHROMIUM.exists() and not shutil.which("chromium"):
        pytest.fail("Chromium is missing: apt-get install -y chromium (.ci/run does this)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)  # a cold worker may still be importing litellm

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, serve: Server, request) -> Iterator:  # noqa: F811
    context = browser.new_context(base_url=serve.base_url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(60_000)  # a cold worker may still be importing litellm
    yield page
    context.close()


@pytest.fixture
def shoot(request) -> callable:
    """shoot(page, "step") saves test-artifacts/<test>-<step>.png."""
    ARTIFACTS.mkdir(exist_ok=True)

    def save(page, step: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save

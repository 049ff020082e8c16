"""The landing page at the README's URL in a real browser, against the real process group:
every door it names opens."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e


def test_the_landing_page_links_open_the_chat_admin_api_docs_and_health(page, shoot):
    page.goto("/")
    expect(page).to_have_title("OpenHive")
    expect(page.get_by_role("heading", name="OpenHive")).to_be_visible()
    shoot(page, "landing")
    for name, lands_on in [
        ("Chat", "/chat/"),
        ("Admin", "/admin/"),
        ("API docs", "/api/v1/docs"),
        ("Health check", "/api/v1/health"),
    ]:
        page.goto("/")
        page.get_by_role("link", name=name).click()
        page.wait_for_load_state()
        assert lands_on in page.url, (name, page.url)
    # The health check answered with its JSON body, not an error page.
    assert '"database": "ok"' in page.content() or '"database":"ok"' in page.content()

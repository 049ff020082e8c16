"""The admin lists each team's MCP servers, their tools and their last error."""

from __future__ import annotations

import pytest

from openhive.tools.mcpclient.source import manager

from .conftest import set_config
from .mcp_helpers import FIXTURE, offered

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def servers_stopped():
    yield
    manager().shutdown()


def test_the_admin_shows_servers_their_tools_and_last_error(admin_client, ops):
    set_config(
        "ops",
        mcp_servers={"fx": FIXTURE, "ghost": {"command": "no-such-mcp-binary"}},
        allowed_tools=["mcp__*"],
    )
    offered(ops)
    page = admin_client.get("/admin/tools/mcpserverstatus/").content.decode()
    assert "fx" in page and "ghost" in page
    assert "running" in page and "failed" in page
    assert "no-such-mcp-binary" in page and "not found" in page

    failed = admin_client.get("/admin/tools/mcpserverstatus/?state=failed").content.decode()
    assert "ghost" in failed and "stdio" in failed

    from openhive.tools.models import McpServerStatus

    row = McpServerStatus.objects.get(server="fx")
    detail = admin_client.get(f"/admin/tools/mcpserverstatus/{row.pk}/change/").content.decode()
    assert "mcp__fx__echo" in detail and "mcp__fx__crash" in detail


def test_the_team_page_lists_every_configured_server_even_before_its_first_use(admin_client, ops):
    set_config(
        "ops",
        mcp_servers={"fx": FIXTURE, "later": {"command": "mcp-server-time"}},
        allowed_tools=["mcp__fx__*"],  # nothing of `later` is admitted: it is never started
    )
    offered(ops)
    page = admin_client.get(f"/admin/teams/team/{ops.pk}/change/").content.decode()
    section = page[page.index('id="team-mcp"') : page.index('id="team-config"')]
    assert "<code>fx</code>" in section and "running" in section
    assert "mcp__fx__echo" in section
    assert "<code>later</code>" in section and "not started yet" in section

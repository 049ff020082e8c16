"""MCP servers over streamable HTTP: a real server (the SDK's MCPServer under uvicorn) started
by the test on loopback, reached through the SSRF guard with a header from the vault."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from openhive.engine.models import ToolCall
from openhive.tools.mcpclient import runtime
from openhive.tools.mcpclient.source import manager
from openhive.tools.models import McpServerStatus
from vault.services import vault_store_secret

from .conftest import set_config
from .mcp_helpers import FIXTURE_SERVER, call_as, offered

pytestmark = pytest.mark.django_db

SECRET = "http-bearer-secret-5a4b3c2d"


@pytest.fixture(autouse=True)
def servers_stopped():
    yield
    manager().shutdown()


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """The fixture server on a free loopback port; yields its host:port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, FIXTURE_SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the loopback MCP server did not start within 30 s")
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def exempt(settings, http_server) -> str:
    """The operator exempts the test's loopback server from the SSRF address rule."""
    settings.OPENHIVE = {**settings.OPENHIVE, "SSRF_ALLOW": [http_server]}
    return http_server


@pytest.mark.usefixtures("vault_key")
def test_an_http_server_gets_its_header_from_the_vault_and_never_shows_it(ops, exempt):
    vault_store_secret(team=ops, key="svc_token", value=SECRET, updated_by="test")
    set_config(
        "ops",
        mcp_servers={
            "svc": {
                "url": f"http://{exempt}/mcp",
                "headers": {"Authorization": "Bearer {{vault:svc_token}}"},
            }
        },
        allowed_tools=["mcp__svc__*"],
    )
    assert {"mcp__svc__whoami", "mcp__svc__echo"} <= set(offered(ops))
    result = call_as(ops, "mcp__svc__whoami")
    assert result["success"] is True
    assert result["text"] == hashlib.sha256(f"Bearer {SECRET}".encode()).hexdigest()
    echoed = call_as(ops, "mcp__svc__echo", text=SECRET)
    assert echoed["text"] == "[REDACTED]"
    state = McpServerStatus.objects.get(team=ops, server="svc")
    assert state.state == "running" and state.transport == "http"
    for row in ToolCall.objects.all():
        assert SECRET not in str(row.arguments) + str(row.result) + row.error


def test_a_private_address_is_refused_by_the_guard_without_connecting(ops, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(runtime, "Connection", never)
    set_config(
        "ops", mcp_servers={"intranet": {"url": "http://10.20.30.40:8080/mcp"}}, allowed_tools=["*"]
    )
    assert not [n for n in offered(ops) if n.startswith("mcp__")]
    state = McpServerStatus.objects.get(team=ops, server="intranet")
    assert state.state == "failed" and "non-public address" in state.last_error


def test_a_loopback_server_the_operator_did_not_exempt_is_refused(ops, http_server):
    set_config(
        "ops", mcp_servers={"svc": {"url": f"http://{http_server}/mcp"}}, allowed_tools=["*"]
    )
    assert not [n for n in offered(ops) if n.startswith("mcp__")]
    state = McpServerStatus.objects.get(team=ops, server="svc")
    assert state.state == "failed" and "loopback" in state.last_error


def test_a_missing_vault_key_in_a_header_is_named(ops, exempt):
    set_config(
        "ops",
        mcp_servers={
            "svc": {
                "url": f"http://{exempt}/mcp",
                "headers": {"Authorization": "Bearer {{vault:nope}}"},
            }
        },
        allowed_tools=["*"],
    )
    assert not [n for n in offered(ops) if n.startswith("mcp__")]
    from openhive.core.context import ToolContext
    from openhive.core.errors import NotFound
    from openhive.tools.mcpclient.source import call_server_tool

    with pytest.raises(NotFound, match='vault key "nope" not found'):
        call_server_tool(ToolContext(team=ops), "svc", "echo", {"text": "x"})

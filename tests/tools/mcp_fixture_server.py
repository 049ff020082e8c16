"""A small real MCP server (the SDK's MCPServer) for the MCP client tests, run as a stdio
subprocess (`python mcp_fixture_server.py`) or over streamable HTTP on loopback
(`python mcp_fixture_server.py http PORT`). Its tools let a test look at what the server sees
(its environment, the request headers) and make it misbehave (echo a secret, exit, grow)."""

from __future__ import annotations

import hashlib
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("fixture")


@server.tool(description="The value of an environment variable of the server, or '(unset)'.")
def env(name: str) -> str:
    return os.environ.get(name, "(unset)")


@server.tool(description="Repeat the text back.")
def echo(text: str, times: int = 1) -> str:
    return " ".join([text] * times)


@server.tool(description="A digest of the Authorization header the server received (HTTP).")
def whoami(ctx: Context) -> str:
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    value = headers.get("authorization")
    return hashlib.sha256(value.encode()).hexdigest() if value else "(none)"


@server.tool(description="Exit the server process at once.")
def crash() -> str:
    print("fixture server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(7)


@server.tool(description="Add a tool named `extra` and tell the client the list changed.")
async def grow(ctx: Context) -> str:
    def extra() -> str:
        """A tool that did not exist at start."""
        return "extra!"

    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool(description="Sleep, then answer.")
async def nap(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "rested"


@server.tool(description="Fail with an error the model should read.")
def refuse(reason: str) -> str:
    raise ValueError(f"refused: {reason}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

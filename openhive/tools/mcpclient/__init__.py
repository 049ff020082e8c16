"""The MCP client: tools of a team's MCP servers (stdio subprocesses or streamable HTTP
endpoints), offered as `mcp__{server}__{tool}`. See `source.py` for the tools, `runtime.py` for
the server lifecycle and `servers.py` for the definitions."""

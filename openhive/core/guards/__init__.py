"""Guards every tool that touches the world goes through: the workspace boundary (files) and
the SSRF rules (network). They are kernel code so that the file tools, the sandbox, the
browser's request routing and MCP HTTP servers all share one implementation."""

"""Plugin tools: team-local Python modules a team writes for itself (`DESCRIPTION`,
`PARAMETERS`, `run(args)`), registered with `register_plugin_tool` after a scan, a secret scan
and an interface check in the sandbox, stored under the workspace's `plugins/` with their
SHA-256, offered as `plugin__{name}`, and run in the sandbox, one subprocess per call."""

"""Built-in tools that belong to no domain app, one module per family: workspace files
(`files`), the sandboxed shell (`shell`), the web (`web`) and a team's own plugin tools
(`plugins/`). `tools.py` imports them so the project's tool discovery registers them."""

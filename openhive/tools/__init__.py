"""Built-in tools that belong to no domain app, one module per family: workspace files
(`files`), the sandboxed shell (`shell`) and the web (`web`). `tools.py` imports them so the
project's tool discovery registers them."""

import logging

from django.apps import AppConfig
from django.conf import settings

logger = logging.getLogger("openhive.tools")


class ToolsConfig(AppConfig):
    name = "openhive.tools"
    label = "tools"
    verbose_name = "Tools (files, shell, web, plugins, MCP)"

    def ready(self) -> None:
        from openhive.core.guards.ssrf import parse_allow
        from openhive.core.registry import register_tool_source

        from .mcpclient.source import mcp_tool_source
        from .plugins.source import PREFIX as PLUGIN_PREFIX
        from .plugins.source import plugin_tool_specs

        # A team's active plugins, offered as plugin__{name} where its allowlist admits them.
        register_tool_source("plugins", plugin_tool_specs, prefix=PLUGIN_PREFIX)
        register_tool_source("mcp", mcp_tool_source, prefix="mcp__")

        from .browser import register

        register()  # the browser tools, for teams whose config has a `browser:` section

        entries = settings.OPENHIVE.get("SSRF_ALLOW") or []
        # A malformed entry must stop start-up rather than silently exempt something else.
        allowed = sorted(parse_allow(entries))
        if allowed:
            logger.warning(
                "SSRF guard: OPENHIVE_SSRF_ALLOW exempts these destinations from the address "
                "rule: %s",
                ", ".join(f"{host}:{port}" for host, port in allowed),
            )

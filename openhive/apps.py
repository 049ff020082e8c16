import os
import threading

from django.apps import AppConfig


class OpenHiveConfig(AppConfig):
    """The project package as an app: management commands, system rules, and the tool registry."""

    name = "openhive"
    label = "openhive"
    verbose_name = "OpenHive"

    def ready(self) -> None:
        from openhive.tools import registry

        registry.autodiscover()
        _preload_llm(os.environ.get("OPENHIVE_PRELOAD_LLM", ""))


def _preload_llm(mode: str) -> None:
    """litellm takes seconds to import. `serve` asks its worker cluster to import it before it
    forks (so every worker inherits it) and the web server to import it in the background, so
    the first session does not pay for it. Nothing else imports it at start-up."""
    if mode not in ("now", "background"):
        return
    from openhive.engine.llm import get_litellm

    if mode == "now":
        get_litellm()
    else:
        threading.Thread(target=get_litellm, name="preload-litellm", daemon=True).start()

import os
import threading

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules

from openhive.engine.llm import get_litellm

# The modules every app may declare, discovered once here so that no registry depends on
# which app's ready() happened to import what: tools, clock jobs, prompt sections, receivers.
DISCOVERED_MODULES = ("tools", "jobs", "prompt", "receivers")


class OpenHiveConfig(AppConfig):
    """The project package as an app: management commands, system rules, and discovery of the
    apps' tools, clock jobs, prompt sections and signal receivers."""

    name = "openhive"
    label = "openhive"
    verbose_name = "OpenHive"

    def ready(self) -> None:
        autodiscover_modules(*DISCOVERED_MODULES)
        _preload_llm(os.environ.get("OPENHIVE_PRELOAD_LLM", ""))


def _preload_llm(mode: str) -> None:
    """litellm takes seconds to import. `serve` asks its worker cluster to import it before it
    forks (so every worker inherits it) and the web server to import it in the background, so
    the first session does not pay for it. Nothing else imports it at start-up."""
    if mode not in ("now", "background"):
        return
    if mode == "now":
        get_litellm()
    else:
        threading.Thread(target=get_litellm, name="preload-litellm", daemon=True).start()

import contextlib
import importlib.util
import os
from pathlib import Path

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules

from openhive.engine.llm import get_litellm

# The modules every app may declare, discovered once here so that no registry depends on
# which app's ready() happened to import what: tools, clock jobs, prompt sections, receivers.
DISCOVERED_MODULES = ("tools", "jobs", "prompt", "receivers")


class NinjaAssetsConfig(AppConfig):
    """django-ninja's templates and static files, found in its package folder, which is looked
    up but not imported (openhive/ninja_assets.py says why). The API's docs page renders
    them itself (`openhive.api.LocalSwagger`)."""

    name = "openhive.ninja_assets"
    label = "ninja"
    verbose_name = "django-ninja assets"
    path = str(Path(importlib.util.find_spec("ninja").origin).parent)  # type: ignore[union-attr,arg-type]


class OpenHiveConfig(AppConfig):
    """The project package as an app: management commands, system rules, and discovery of the
    apps' tools, clock jobs, prompt sections and signal receivers."""

    name = "openhive"
    label = "openhive"
    verbose_name = "OpenHive"

    def ready(self) -> None:
        autodiscover_modules(*DISCOVERED_MODULES)
        _preload_llm(os.environ.get("OPENHIVE_PRELOAD_LLM", ""))
        _announce_workers(os.environ.get("OPENHIVE_READY_DIR", ""))


def _announce_workers(ready_dir: str) -> None:
    """Under `serve`: each django-q2 worker, once spawned and ready for work, leaves a file in
    the folder serve watches, so serve's banner comes only once the workers can run tasks."""
    if not ready_dir:
        return
    from django_q.signals import post_spawn

    def announce(sender: object, proc_name: str = "", **kwargs: object) -> None:
        with contextlib.suppress(OSError):
            (Path(ready_dir) / f"worker-{os.getpid()}").touch()

    post_spawn.connect(announce, weak=False, dispatch_uid="openhive-announce-workers")


def _preload_llm(mode: str) -> None:
    """litellm takes seconds to import. A process that needs it at once, the chat turn host,
    is started with OPENHIVE_PRELOAD_LLM=now and imports it here, so its first turn does not
    pay for it; `serve`'s web server imports it in the background once it listens
    (`openhive.webserver.WebServer`). Nothing else imports it at start-up."""
    if mode == "now":
        get_litellm()

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand


class Verb:
    """One `manage.py openhive <verb>`."""

    help = ""
    # Django's system checks import the URL configuration (the admin, the REST API). A
    # long-running process that never serves a request skips them: the operator's `check`,
    # and `serve` before it starts its children, run them.
    system_checks = True
    # A verb that migrates the database itself (serve, init, demo) may start on one that has
    # no tables yet; every other verb is refused there, with the fix, before it touches it.
    migrates = False

    def add_arguments(self, parser: ArgumentParser) -> None:
        pass

    def epilog(self) -> str | None:
        """Shown at the end of the verb's --help (examples, lists)."""
        return None

    def run(self, command: BaseCommand, **options: Any) -> None:
        raise NotImplementedError

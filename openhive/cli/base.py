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

    def add_arguments(self, parser: ArgumentParser) -> None:
        pass

    def epilog(self) -> str | None:
        """Shown at the end of the verb's --help (examples, lists)."""
        return None

    def migrates(self, options: dict[str, Any]) -> bool:
        """Whether this run migrates the database itself (serve, init, demo), and so may start
        on one that has no tables yet; any other run is refused there, with the fix, before
        it touches it."""
        return False

    def run(self, command: BaseCommand, **options: Any) -> None:
        raise NotImplementedError

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

# `Verb.system_checks`: every check but the URL configuration's, or none.
WITHOUT_URLS, NONE = "without-urls", "none"


class Verb:
    """One `manage.py openhive <verb>`."""

    help = ""
    # Which of Django's system checks run first. The URL configuration's import the admin
    # and the REST API (~0.5 s of a start on a slow 2-core machine): they run where the URLs
    # are served, in the web process as it starts (`openhive.asgi`), and in the operator's
    # `manage.py check`. Every other check runs before a verb (WITHOUT_URLS); a long-running
    # worker runs none (NONE).
    system_checks = WITHOUT_URLS

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

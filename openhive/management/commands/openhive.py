"""`manage.py openhive <verb>`: the operator's command line. Each verb lives in openhive/cli/."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from openhive.cli import VERBS
from openhive.errors import DomainError


class Command(BaseCommand):
    help = (
        "Run and operate OpenHive: serve, engine, init, demo, tool, spawn, delegate, status, token."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        for name, verb in VERBS.items():
            verb.add_arguments(sub.add_parser(name, help=verb.help))

    def handle(self, *args, verb: str, **options) -> None:
        try:
            VERBS[verb].run(self, **options)
        except DomainError as exc:
            raise CommandError(exc.message) from exc

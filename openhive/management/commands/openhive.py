"""`manage.py openhive <verb>`: the operator's command line. Each verb lives in openhive/cli/."""

from __future__ import annotations

import os
import textwrap
from argparse import RawDescriptionHelpFormatter
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.management.base import (
    ALL_CHECKS,
    BaseCommand,
    CommandError,
    CommandParser,
)
from django.db import connection

from openhive.cli import VERBS
from openhive.cli.base import NONE, Verb
from openhive.core.dburl import MIGRATED_ENV, database_problem, migration_problem
from openhive.core.errors import DomainError
from openhive.core.text import UnstorableText, check_storable


class Command(BaseCommand):
    help = (
        "Run and operate OpenHive. `manage.py openhive <verb> --help` describes each verb and "
        "its arguments."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True, metavar="<verb>")
        for name, verb in VERBS.items():
            # `openhive <verb> --help` opens with the same summary the verb list shows.
            verb.add_arguments(
                sub.add_parser(
                    name,
                    help=verb.help,
                    description=textwrap.fill(verb.help, 79),
                    epilog=verb.epilog(),
                    formatter_class=RawDescriptionHelpFormatter,
                )
            )

    def execute(self, *args: Any, **options: Any) -> Any:
        verb = VERBS.get(options.get("verb") or "")
        wanted = system_checks_for(verb)
        if not wanted:
            options["skip_checks"] = True
        else:
            self.requires_system_checks = wanted
        return super().execute(*args, **options)

    def handle(self, *args, verb: str, **options) -> None:
        # Arguments the shell could not decode arrive as lone surrogates; a JSON argument may
        # spell a NUL. Neither can be stored: refused here, before any verb writes anything.
        try:
            check_storable({k: v for k, v in options.items() if isinstance(v, str)})
        except UnstorableText as exc:
            raise CommandError(f"argument {exc}") from exc
        problem = database_problem(connection, settings.DATABASE_URL)
        # serve's own children start once it has migrated: they skip the check.
        if not problem and not (VERBS[verb].migrates(options) or os.environ.get(MIGRATED_ENV)):
            problem = migration_problem(connection, settings.DATABASE_URL)
        if problem:
            raise CommandError(problem)
        try:
            VERBS[verb].run(self, **options)
        except DomainError as exc:
            raise CommandError(exc.message) from exc


def system_checks_for(verb: Verb | None) -> str | list[str]:
    """What `requires_system_checks` means for `verb` (see `Verb.system_checks`): the tags of
    every registered check but the URL configuration's, or [] (none); without a verb, as for
    any command, every check."""
    if verb is None:
        return ALL_CHECKS
    if verb.system_checks == NONE:
        return []
    return sorted(checks.registry.registry.tags_available() - {checks.Tags.urls})

#!/usr/bin/env python
"""Django's command-line utility for OpenHive."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    from django.core.management import execute_from_command_line

    from openhive.core.dburl import DatabaseUrlError

    try:
        execute_from_command_line(sys.argv)
    except DatabaseUrlError as exc:  # a few lines naming DATABASE_URL, not a traceback
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()

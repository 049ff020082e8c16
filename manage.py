#!/usr/bin/env python
"""Django's command-line utility for OpenHive."""

import os
import sys


def main() -> None:
    # Machines and CI often set PYTHONDONTWRITEBYTECODE; then every start compiles each import
    # of this stack again (seconds). The first run writes the bytecode into the environment and
    # later starts (and the processes `serve` starts) read it. OPENHIVE_WRITE_BYTECODE=0 keeps
    # the machine's choice.
    if os.environ.get("OPENHIVE_WRITE_BYTECODE", "1") != "0":
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        sys.dont_write_bytecode = False
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")
    from openhive.core.heap import quiet_start

    quiet_start()  # back on once the apps are loaded
    from django.core.management import execute_from_command_line

    from openhive.core.dburl import DatabaseUrlError

    try:
        execute_from_command_line(sys.argv)
    except DatabaseUrlError as exc:  # a few lines naming DATABASE_URL, not a traceback
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()

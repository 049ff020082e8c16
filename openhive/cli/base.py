from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand


class Verb:
    """One `manage.py openhive <verb>`."""

    help = ""

    def add_arguments(self, parser: ArgumentParser) -> None:
        pass

    def run(self, command: BaseCommand, **options: Any) -> None:
        raise NotImplementedError

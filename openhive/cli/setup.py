"""`init` (data dir, example config, demo script, admin user) and `token create`."""

from __future__ import annotations

import os
import secrets
import shutil
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from openhive.core import paths
from openhive.engine.providers import providers_file
from teams.services import team_ensure_main
from trust.models import ApiToken
from trust.services import RIGHTS_TEXT, api_token_create, token_rights

from .base import Verb

TEMPLATES = Path(__file__).resolve().parent / "templates"


def install_demo_script() -> Path:
    target = paths.scripts_dir() / "demo.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copy(TEMPLATES / "demo.yaml", target)
    return target


def use_demo_provider() -> bool:
    """Point the default profile at the offline demo, unless providers.yaml already exists."""
    path = providers_file()
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("profiles:\n  default:\n    model: scripted/demo.yaml\n")
    return True


class Init(Verb):
    help = (
        "init [--demo] [--username U] [--no-user]: create the data dir, example config, demo "
        "script and an admin user with an API token; safe to run again."
    )

    def migrates(self, options: dict[str, Any]) -> bool:
        return True

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--demo",
            action="store_true",
            help="point the default provider profile at the offline scripted demo",
        )
        parser.add_argument(
            "--username",
            default="admin",
            help="the admin user to create (default admin; DJANGO_SUPERUSER_PASSWORD sets its "
            "password)",
        )
        parser.add_argument("--no-user", action="store_true", help="do not create a user")

    def run(self, command: BaseCommand, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        for folder in (paths.config_dir(), paths.admin_rules_dir(), paths.teams_dir()):
            folder.mkdir(parents=True, exist_ok=True)
        example = paths.config_dir() / "providers.yaml.example"
        if not example.exists():
            shutil.copy(TEMPLATES / "providers.yaml.example", example)
        install_demo_script()
        team_ensure_main()
        out = command.stdout
        out.write(f"Data dir: {paths.data_dir()}")
        if options["demo"]:
            if use_demo_provider():
                out.write(f"Offline demo: {providers_file()} uses scripted/demo.yaml.")
            else:
                out.write(f"{providers_file()} exists already; left unchanged.")
        elif not providers_file().exists():
            out.write(f"No provider yet: copy {example} to providers.yaml, or run init --demo.")
        if not options["no_user"]:
            self._ensure_user(command, options["username"])

    def _ensure_user(self, command: BaseCommand, username: str) -> None:
        users = get_user_model().objects
        if users.filter(username=username).exists():
            command.stdout.write(f"User {username!r} exists already.")
            return
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD") or secrets.token_urlsafe(12)
        users.create_superuser(username=username, email="", password=password)
        _, token = api_token_create(username=username, name="init")
        command.stdout.write(f"Created admin user {username!r}.")
        if "DJANGO_SUPERUSER_PASSWORD" not in os.environ:
            command.stdout.write(f"  password: {password}   (shown once; change it in the admin)")
        command.stdout.write(f"  API token: {token}   (shown once; operator rights)")


class Token(Verb):
    help = (
        "token create <username> [--name N] [--scope user|operator|chat]: print a new API "
        "token for a user, and the rights it gives."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["create"], help="create: make a new token")
        parser.add_argument("username", help="the user the token acts as")
        parser.add_argument("--name", default="", help="a label to tell tokens apart in the admin")
        parser.add_argument(
            "--scope",
            default=ApiToken.Scope.USER,
            choices=ApiToken.Scope.values,
            help="user (default): the user's own rights, operator for staff and chat for "
            "everyone else; operator: operator rights even for a non-staff user; chat: chat "
            "and its own topics only, even for a staff user",
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        row, token = api_token_create(
            username=options["username"], name=options["name"], scope=options["scope"]
        )
        rights = token_rights(scope=row.scope, is_staff=row.user.is_staff)
        # The token alone on stdout, so a script can capture it; what it may do on stderr.
        command.stdout.write(token)
        why = {
            ApiToken.Scope.OPERATOR: "granted by --scope operator",
            ApiToken.Scope.CHAT: "restricted by --scope chat",
        }.get(row.scope, f"{row.user.get_username()} is {'' if row.user.is_staff else 'not '}staff")
        command.stderr.write(f"This token has {RIGHTS_TEXT[rights]} ({why}).")

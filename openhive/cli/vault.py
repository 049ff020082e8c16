"""Memory and vault maintenance verbs: `rotate-vault-key` and `reembed`."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from cryptography.fernet import Fernet
from django.core.management.base import BaseCommand, CommandError

from memory.embeddings import current_model
from memory.services import memory_reembed
from teams.selectors import team_get
from vault import crypto
from vault.services import vault_rotate_key

from .base import Verb


class RotateVaultKey(Verb):
    help = (
        "rotate-vault-key [--generate]: re-encrypt every vault secret with the first key of "
        "OPENHIVE_VAULT_KEY (list the new key first, keep the old ones after it until this ran)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--generate",
            action="store_true",
            help="only print a new key (put it first in OPENHIVE_VAULT_KEY, then run again)",
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        if options["generate"]:
            command.stdout.write(Fernet.generate_key().decode())
            return
        keys = crypto.configured_keys()
        if not keys:
            raise CommandError(
                "OPENHIVE_VAULT_KEY is not set: set it to `<new key>` (from --generate); the key "
                "derived from SECRET_KEY still decrypts the old secrets during the rotation"
            )
        for key in keys:
            try:
                crypto.validate_key(key)
            except ValueError as exc:
                raise CommandError(f"OPENHIVE_VAULT_KEY: {exc}") from exc
        report = vault_rotate_key()
        command.stdout.write(f"Re-encrypted {report.rotated} secret(s) with the first key.")
        if report.failed:
            raise CommandError(
                f"{len(report.failed)} secret(s) could not be decrypted with any configured key "
                f"and were left unchanged: {', '.join(report.failed)}. Add the key they were "
                "written with to OPENHIVE_VAULT_KEY and run again."
            )
        if len(keys) > 1:
            command.stdout.write("All secrets use the first key now; older keys can be removed.")


class Reembed(Verb):
    help = (
        "reembed [--team T] [--batch-size N]: embed memory chunks with the current embedding "
        "model (after changing it); shows its progress and can be stopped and run again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--team", default=None, help="only the chunks of this team")
        parser.add_argument(
            "--batch-size",
            type=int,
            default=64,
            help="chunks embedded and committed together (default 64)",
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        team = None
        if options["team"]:
            team = team_get(name=options["team"])
            if team is None:
                raise CommandError(f'team "{options["team"]}" not found')
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        command.stdout.write(f"Embedding model: {current_model() or 'none'}")
        out = command.stdout

        def progress(done: int, total: int) -> None:
            out.write(f"  {done}/{total} chunk(s) embedded ({done * 100 // max(total, 1)}%)")
            out.flush()

        report = memory_reembed(batch_size=options["batch_size"], team=team, progress=progress)
        command.stdout.write(f"Embedded {report['embedded']} chunk(s) with {report['model']}.")

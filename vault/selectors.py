from collections.abc import Iterable

from django.db.models import QuerySet

from openhive.core.compiled import CompiledQuery
from openhive.core.reads import Read, run_reads
from teams.models import Team
from vault import crypto
from vault.models import VaultEntry


def _secret_ciphertexts() -> QuerySet:
    return VaultEntry.objects.filter(is_secret=True).values_list("value", flat=True)


# The scrubber reloads every secret at each session's start (and when its cache is stale).
_ALL_SECRETS = CompiledQuery(_secret_ciphertexts)


def vault_secret_values(*, team: Team | None = None) -> list[str]:
    """Plaintext of every secret row (of one team, or all): for the scrubber only."""
    if team is None:
        return run_reads([vault_secrets_read()])[0]
    return _decrypted(_secret_ciphertexts().filter(team=team))


def vault_secrets_read() -> Read:
    """`vault_secret_values()` as a read that can share a round trip with other statements."""
    sql, params = _ALL_SECRETS.sql()
    return Read(sql, params, lambda _columns, rows: _decrypted(row[0] for row in rows))


def _decrypted(ciphertexts: Iterable[str]) -> list[str]:
    values = []
    for ciphertext in ciphertexts:
        try:
            values.append(crypto.decrypt(ciphertext))
        except ValueError:
            continue
    return values


def vault_keys(*, team: Team) -> list[dict]:
    """Keys and metadata of a team's vault; secret values are never part of it."""
    return [
        {
            "key": e.key,
            "is_secret": e.is_secret,
            "value": None if e.is_secret else e.value,
            "updated_by": e.updated_by,
            "version": e.version,
            "updated_at": e.updated_at,
        }
        for e in VaultEntry.objects.filter(team=team).order_by("key")
    ]

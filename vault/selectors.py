from teams.models import Team
from vault import crypto
from vault.models import VaultEntry


def vault_secret_values(*, team: Team | None = None) -> list[str]:
    """Plaintext of every secret row (of one team, or all): for the scrubber only."""
    rows = VaultEntry.objects.filter(is_secret=True)
    if team is not None:
        rows = rows.filter(team=team)
    values = []
    for ciphertext in rows.values_list("value", flat=True):
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

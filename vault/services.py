from django.db import transaction

from teams.models import Team
from vault import crypto, scrubbing
from vault.models import VaultEntry


@transaction.atomic
def vault_store_secret(*, team: Team, key: str, value: str, updated_by: str) -> VaultEntry:
    """Write a secret (encrypted). Only system paths call this: spawn credentials, admin, API."""
    entry, created = VaultEntry.objects.select_for_update().get_or_create(
        team=team,
        key=key,
        defaults={"value": crypto.encrypt(value), "is_secret": True, "updated_by": updated_by},
    )
    if not created:
        entry.value = crypto.encrypt(value)
        entry.is_secret = True
        entry.updated_by = updated_by
        entry.version += 1
        entry.save()
    transaction.on_commit(scrubbing.invalidate)
    scrubbing.invalidate()
    scrubbing.remember([value])
    return entry

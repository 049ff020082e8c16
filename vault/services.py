import logging
from dataclasses import dataclass, field

from django.db import transaction

from openhive.core import scrubbing
from openhive.core.errors import DomainError, NotAllowed
from teams.models import Team
from vault import crypto
from vault.models import VaultEntry

logger = logging.getLogger(__name__)

MAX_KEY_LENGTH = 200
MAX_VALUE_CHARS = 100_000


@transaction.atomic
def vault_store_secret(*, team: Team, key: str, value: str, updated_by: str) -> VaultEntry:
    """Write a secret (encrypted). Only system paths call this: spawn credentials, admin, API."""
    key = _clean_key(key)
    if not value:
        raise DomainError("a secret value must not be empty", code="invalid_value")
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


def _clean_key(key: str) -> str:
    key = (key or "").strip()
    if not key or len(key) > MAX_KEY_LENGTH:
        raise DomainError(f"key must be 1 to {MAX_KEY_LENGTH} characters", code="invalid_key")
    return key


@transaction.atomic
def vault_set(*, team: Team, key: str, value: str, updated_by: str) -> tuple[VaultEntry, bool]:
    """Write team state (never a secret). Refuses to touch a secret row: those are system-managed.
    Returns the entry and whether it was created."""
    key = _clean_key(key)
    # Plain state is shown in the API and the admin: a team copying a secret into it (or
    # anything secret-shaped) stores [REDACTED] instead.
    value = scrubbing.scrub(value)
    if len(value) > MAX_VALUE_CHARS:
        raise DomainError(f"value is longer than {MAX_VALUE_CHARS} characters", code="too_large")
    entry = VaultEntry.objects.select_for_update().filter(team=team, key=key).first()
    if entry is not None and entry.is_secret:
        raise NotAllowed(
            f'cannot overwrite system-managed secret "{key}": secrets are set by the operator '
            "(admin or API) or by the parent team's spawn_team credentials",
            code="secret_read_only",
        )
    if entry is None:
        entry = VaultEntry.objects.create(team=team, key=key, value=value, updated_by=updated_by)
        return entry, True
    if entry.value != value:
        entry.value = value
        entry.version += 1
    entry.updated_by = updated_by
    entry.save()
    return entry, False


def vault_read(*, team: Team, key: str) -> VaultEntry | None:
    """The entry of the team, with a secret's value decrypted in memory (never saved back)."""
    entry = VaultEntry.objects.filter(team=team, key=(key or "").strip()).first()
    if entry is not None and entry.is_secret:
        try:
            entry.value = crypto.decrypt(entry.value)
        except ValueError as exc:
            raise DomainError(
                f'secret "{entry.key}" cannot be decrypted with the configured vault keys; '
                "ask the operator to restore the key it was written with (OPENHIVE_VAULT_KEY)",
                code="vault_key_mismatch",
            ) from exc
        # A secret stored by another process a moment ago is not in this process's cached
        # scrubber yet: whatever the caller does with the value (a tool result, a reply that
        # repeats it, the session's end), the scrubber knows it from now on.
        scrubbing.remember([entry.value])
    return entry


@transaction.atomic
def vault_delete(*, team: Team, key: str) -> bool:
    """Remove team state. Secret rows are refused; a missing key is not an error (False)."""
    entry = (
        VaultEntry.objects.select_for_update().filter(team=team, key=(key or "").strip()).first()
    )
    if entry is None:
        return False
    if entry.is_secret:
        raise NotAllowed(
            f'cannot delete system-managed secret "{entry.key}": ask the operator',
            code="secret_read_only",
        )
    entry.delete()
    return True


@transaction.atomic
def vault_delete_secret(*, team: Team, key: str) -> bool:
    """Operator path (API, admin): remove any entry, secret or not."""
    deleted, _ = VaultEntry.objects.filter(team=team, key=(key or "").strip()).delete()
    scrubbing.invalidate()
    return bool(deleted)


@dataclass
class RotationReport:
    rotated: int = 0
    failed: list[str] = field(default_factory=list)  # "team:key" of rows no key can decrypt


def vault_rotate_key() -> RotationReport:
    """Re-encrypt every secret with the first configured key. Each row commits on its own, so
    an interrupted run can simply be repeated; rows no key decrypts are reported, not touched."""
    crypto.reset_keys()
    report = RotationReport()
    ids = list(
        VaultEntry.objects.filter(is_secret=True).order_by("pk").values_list("pk", flat=True)
    )
    for pk in ids:
        with transaction.atomic():
            entry = VaultEntry.objects.select_for_update().select_related("team").get(pk=pk)
            try:
                entry.value = crypto.rotate(entry.value)
            except ValueError:
                report.failed.append(f"{entry.team.name}:{entry.key}")
                continue
            # Same secret, same version: only its encryption changed.
            entry.save(update_fields=["value"])
            report.rotated += 1
    if report.failed:
        logger.warning("vault rotation: %d secret(s) could not be decrypted", len(report.failed))
    return report

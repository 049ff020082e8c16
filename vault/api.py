"""REST: a team's vault (/api/v1/vault/{team}). Keys and metadata only: a secret's value is
never returned, not even to the operator who set it. Operators may set and delete secrets here
(the team itself cannot)."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Field, Router, Schema, Status

from openhive.core.api import request_actor
from openhive.core.errors import NotFound
from openhive.core.scrubbing import scrub
from teams.selectors import team_get_or_404

from .selectors import vault_keys
from .services import vault_delete_secret, vault_set, vault_store_secret

router = Router(tags=["vault"])


class VaultEntryOut(Schema):
    key: str
    is_secret: bool
    value: str | None = Field(None, description="plain state only; always null for secrets")
    updated_by: str
    version: int
    updated_at: datetime


class VaultEntryIn(Schema):
    value: str = Field(..., min_length=1, max_length=100_000)
    secret: bool = Field(True, description="store encrypted as a secret (default)")


def _entry_out(entry: dict) -> dict:
    value = None if entry["is_secret"] else scrub(entry["value"])
    return {**entry, "value": value}


@router.get("/{team}", response=list[VaultEntryOut], summary="Keys and metadata of a vault")
def vault_list(request: HttpRequest, team: str) -> list[dict]:
    return [_entry_out(e) for e in vault_keys(team=team_get_or_404(name=team))]


@router.put("/{team}/{key}", response=VaultEntryOut, summary="Set a secret or a state value")
def vault_put(request: HttpRequest, team: str, key: str, body: VaultEntryIn) -> dict:
    owner = team_get_or_404(name=team)
    user = request_actor(request)
    if body.secret:
        vault_store_secret(team=owner, key=key, value=body.value, updated_by=f"api:{user}")
    else:
        vault_set(team=owner, key=key, value=body.value, updated_by=f"api:{user}")
    entry = next(e for e in vault_keys(team=owner) if e["key"] == key.strip())
    return _entry_out(entry)


@router.delete("/{team}/{key}", response={204: None}, summary="Delete an entry (even a secret)")
def vault_remove(request: HttpRequest, team: str, key: str) -> Status:
    if not vault_delete_secret(team=team_get_or_404(name=team), key=key):
        raise NotFound(f'vault key "{key}" not found in team {team}')
    return Status(204, None)

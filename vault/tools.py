"""Vault tools: the calling team's state and secrets. Teams read secrets (vault_get) but never
write or delete them; those rows are system-managed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import NotFound
from openhive.core.registry import tool

from .selectors import vault_keys
from .services import vault_delete, vault_read, vault_set


class VaultSetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="Name of the state entry")
    value: str = Field(description="The value (plain team state, not a secret)")


@tool(
    name="vault_set",
    description=(
        "Store a piece of team state (cursors, settings, journals) under a key. Secrets cannot "
        "be written here; they are managed by the operator."
    ),
    args=VaultSetArgs,
)
def vault_set_tool(ctx: ToolContext, args: VaultSetArgs) -> dict:
    entry, created = vault_set(team=ctx.team, key=args.key, value=args.value, updated_by=ctx.caller)
    # The value is not echoed back: the caller has it, and an echo is one more copy.
    return {"key": entry.key, "created": created, "version": entry.version}


class VaultKeyArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="Name of the entry")


@tool(
    name="vault_get",
    description=(
        "Read a value from your team's vault, including secrets. Use a secret only where it is "
        "needed; never repeat it in messages, memory or files."
    ),
    args=VaultKeyArgs,
)
def vault_get_tool(ctx: ToolContext, args: VaultKeyArgs) -> dict:
    entry = vault_read(team=ctx.team, key=args.key)
    if entry is None:
        raise NotFound(f'vault key "{args.key}" not found (vault_list shows your keys)')
    return {"key": entry.key, "value": entry.value, "is_secret": entry.is_secret}


class VaultListArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prefix: str = Field(default="", description="Only keys starting with this")


@tool(
    name="vault_list",
    description="List your team's vault keys with metadata; secret values are never listed.",
    args=VaultListArgs,
)
def vault_list_tool(ctx: ToolContext, args: VaultListArgs) -> dict:
    entries = [
        {**e, "updated_at": e["updated_at"].isoformat()}
        for e in vault_keys(team=ctx.team)
        if e["key"].startswith(args.prefix)
    ]
    for e in entries:
        if e["is_secret"]:
            e.pop("value")
    return {"entries": entries, "count": len(entries)}


@tool(
    name="vault_delete",
    description="Delete a state entry from your team's vault (secrets cannot be deleted).",
    args=VaultKeyArgs,
)
def vault_delete_tool(ctx: ToolContext, args: VaultKeyArgs) -> dict:
    return {"deleted": vault_delete(team=ctx.team, key=args.key)}

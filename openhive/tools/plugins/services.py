"""Every state change of a team's plugins: registration (name, scan, secret scan, interface
check in the sandbox, then the file and its row), verification of the file against its hash,
deprecation and removal (the operator's, from the admin)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from openhive.core.errors import Conflict, DomainError
from openhive.core.guards.workspace import Workspace
from openhive.core.registry import get_tool
from openhive.core.scrubbing import get_scrubber
from teams.models import Team
from teams.prompt import ancestors

from ..models import Plugin
from .interface import sandbox_check, static_problems
from .scan import RESERVED_NAME, Finding, scan_source
from .secretscan import scan_secrets
from .selectors import plugin_file

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,55}$")
MAX_SOURCE_CHARS = 100_000
PLUGINS_DIR = "plugins"
# Names a plugin may never take besides every declared tool's (the classic built-ins' short
# names, and words that would read as the plugin machinery itself).
RESERVED_WORDS = frozenset(
    {"read", "write", "edit", "glob", "grep", "bash", "python", "plugin", "plugins", "tool"}
)
Status = Plugin.Status


class PluginRefused(DomainError):
    """A registration refused by a check: the first finding gives the code and the line; all
    of them are listed (up to a few), so the team can fix everything in one go."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings[:10]
        first = self.findings[0]
        lines = "; ".join(
            f"line {f.line}: {f.message}" if f.line else f.message for f in self.findings
        )
        more = f" (and {len(findings) - 10} more)" if len(findings) > 10 else ""
        super().__init__(f"{first.code}: {lines}{more}", code=first.code)
        self.line = first.line or None


def team_workspace(team: Team) -> Workspace:
    workspace = Workspace.for_team(team.name, ancestors=[t.name for t in ancestors(team)])
    if not workspace.root.is_dir():
        raise DomainError(
            f"the workspace of team {team.name} does not exist ({workspace.root})",
            code="workspace_missing",
        )
    return workspace


def source_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def plugin_register(
    *, team: Team, tool_name: str, source_code: str, registered_by: str = ""
) -> Plugin:
    """Check a plugin and store it as the team's `plugin__{tool_name}`. Registering a name the
    team already has (active, or failed verification) replaces that plugin with a new version.
    The checks run outside any transaction (the sandbox takes a moment); the caller holds the
    team's org-op mutex, so two registrations of one team never interleave."""
    check_name(team=team, tool_name=tool_name)
    if not source_code.strip():
        raise DomainError("source_code is empty", code="invalid_interface")
    if len(source_code) > MAX_SOURCE_CHARS:
        raise DomainError(
            f"source_code is over {MAX_SOURCE_CHARS} characters; a plugin is one small module",
            code="invalid_interface",
        )
    findings = scan_source(source_code) + scan_secrets(
        source_code, known=get_scrubber(refresh=True).secrets
    )
    if findings:
        raise PluginRefused(sorted(findings, key=lambda f: (f.code != "INVALID_INTERFACE", f.line)))
    missing = static_problems(source_code)
    if missing:
        raise PluginRefused(missing)
    workspace = team_workspace(team)
    interface, problems = sandbox_check(
        name=tool_name, source=source_code, workspace=workspace.root
    )
    if problems:
        raise PluginRefused(problems)
    return _store(
        team=team,
        tool_name=tool_name,
        source=source_code.encode("utf-8"),
        description=interface["description"],
        parameters=interface["parameters"],
        registered_by=registered_by,
        workspace=workspace,
    )


def check_name(*, team: Team, tool_name: str) -> None:
    if not NAME_PATTERN.match(tool_name) or "__" in tool_name:
        raise DomainError(
            f"tool_name {tool_name!r} is not valid: use snake_case (a lowercase letter, then "
            "lowercase letters, digits and single underscores), at most 56 characters",
            code="invalid_name",
        )
    offered = f"plugin__{tool_name}"
    if tool_name in RESERVED_WORDS or get_tool(tool_name) or get_tool(offered):
        raise PluginRefused(
            [Finding(RESERVED_NAME, 0, f"tool_name {tool_name!r} is reserved (a built-in tool)")]
        )
    deprecated = Plugin.objects.filter(
        team=team, tool_name=tool_name, status=Status.DEPRECATED
    ).first()
    if deprecated is not None:
        reason = f" ({deprecated.status_reason})" if deprecated.status_reason else ""
        raise PluginRefused(
            [
                Finding(
                    RESERVED_NAME,
                    0,
                    f"{offered} was deprecated by the operator{reason}; the name stays taken "
                    "until the operator removes it. Choose another name.",
                )
            ]
        )


@transaction.atomic
def _store(
    *,
    team: Team,
    tool_name: str,
    source: bytes,
    description: str,
    parameters: dict,
    registered_by: str,
    workspace: Workspace,
) -> Plugin:
    now = timezone.now()
    relative = f"{PLUGINS_DIR}/{tool_name}.py"
    existing = (
        Plugin.objects.select_for_update()
        .filter(team=team, tool_name=tool_name)
        .exclude(status=Status.REMOVED)
        .first()
    )
    plugin = existing or Plugin(team=team, tool_name=tool_name, version=0)
    if plugin.status == Status.DEPRECATED:  # deprecated while this registration was checked
        raise Conflict(f"plugin__{tool_name} was deprecated meanwhile; choose another name")
    plugin.status = Status.ACTIVE
    plugin.source_path = relative
    plugin.source_hash = source_hash(source)
    plugin.description = description
    plugin.parameters = parameters
    plugin.version += 1
    plugin.registered_by = registered_by[:100]
    plugin.verified_at = now
    plugin.status_reason = ""
    plugin.save()
    # Written last: if the write fails the row rolls back; the file is only ever read after
    # its hash is checked against the row.
    workspace.write_atomic(workspace.resolve_for_write(relative), source)
    return plugin


def read_verified(plugin: Plugin) -> str:
    """The plugin's source, read once and checked against its hash. A file that is missing or
    changed marks the plugin `failed_verification` and is refused."""
    data = plugin_file(plugin)
    if data is None or source_hash(data) != plugin.source_hash:
        why = "its file is missing" if data is None else "its file no longer matches its hash"
        plugin_fail_verification(plugin=plugin, reason=why)
        raise DomainError(
            f"plugin__{plugin.tool_name} failed verification: {why} ({plugin.source_path}); "
            "it was not run. Register it again with register_plugin_tool.",
            code="failed_verification",
        )
    return data.decode("utf-8")


@transaction.atomic
def plugin_fail_verification(*, plugin: Plugin, reason: str) -> Plugin:
    updated = Plugin.objects.filter(pk=plugin.pk, status=Status.ACTIVE).update(
        status=Status.FAILED_VERIFICATION,
        status_reason=reason,
        status_changed_by="verification",
        status_changed_at=timezone.now(),
    )
    if updated:
        plugin.refresh_from_db()
    return plugin


@transaction.atomic
def plugin_verify(*, plugin: Plugin) -> Plugin:
    """Check the file against the hash now: a matching file of a plugin that failed
    verification makes it active again (the operator restored it); a changed one fails."""
    plugin = Plugin.objects.select_for_update().get(pk=plugin.pk)
    if plugin.status not in (Status.ACTIVE, Status.FAILED_VERIFICATION):
        raise Conflict(f"plugin__{plugin.tool_name} is {plugin.status}; only live plugins verify")
    try:
        read_verified(plugin)
    except DomainError:
        plugin.refresh_from_db()
        return plugin
    if plugin.status == Status.FAILED_VERIFICATION:
        _set_status(plugin, Status.ACTIVE, reason="verified again", by="operator")
    plugin.verified_at = timezone.now()
    plugin.save(update_fields=["verified_at", "updated_at"])
    return plugin


@transaction.atomic
def plugin_deprecate(*, plugin: Plugin, reason: str, by: str) -> Plugin:
    """Stop offering a plugin; the file stays for audit and rollback, the name stays taken."""
    if not reason.strip():
        raise DomainError("a reason is required to deprecate a plugin", code="invalid_input")
    plugin = Plugin.objects.select_for_update().get(pk=plugin.pk)
    if plugin.status in (Status.DEPRECATED, Status.REMOVED):
        raise Conflict(f"plugin__{plugin.tool_name} is already {plugin.status}")
    _set_status(plugin, Status.DEPRECATED, reason=reason.strip(), by=by)
    return plugin


@transaction.atomic
def plugin_remove(*, plugin: Plugin, by: str) -> Plugin:
    """Delete the file and archive the row (kept for the audit trail); the name is free again.
    An active plugin is deprecated first, so removal is always a deliberate second step."""
    plugin = Plugin.objects.select_for_update().get(pk=plugin.pk)
    if plugin.status == Status.ACTIVE:
        raise Conflict(f"plugin__{plugin.tool_name} is active: deprecate it before removing it")
    if plugin.status == Status.REMOVED:
        raise Conflict(f"plugin__{plugin.tool_name} is already removed")
    _set_status(plugin, Status.REMOVED, reason=plugin.status_reason, by=by)
    _unlink(plugin)
    return plugin


def _unlink(plugin: Plugin) -> None:
    workspace = Workspace.for_team(plugin.team.name)
    path = Path(os.path.realpath(workspace.root / plugin.source_path))
    # Only ever a file of the team's own plugins folder.
    if path.parent == workspace.root / PLUGINS_DIR and path.is_file():
        path.unlink()


def _set_status(plugin: Plugin, status: str, *, reason: str, by: str) -> None:
    plugin.status = status
    plugin.status_reason = reason
    plugin.status_changed_by = by[:100]
    plugin.status_changed_at = timezone.now()
    changed = ["status", "status_reason", "status_changed_by", "status_changed_at"]
    plugin.save(update_fields=[*changed, "updated_at"])

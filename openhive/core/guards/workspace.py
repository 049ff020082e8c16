"""A team's workspace as its only file world: realpath containment for every path, write
governance for the places a team must not change, and race-safe opening.

Resolution follows every symlink (walking up to the nearest existing ancestor for paths that do
not exist yet), so a link that points out is judged by where it points. Opening then walks the
checked path one component at a time from a directory descriptor of the root with O_NOFOLLOW,
so a symlink swapped in after the check (a sandboxed `bash` can make symlinks) fails instead of
leading out."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from openhive.core import paths
from openhive.core.errors import DomainError

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
CONFIG_FILE = "config.yaml"


class PathOutsideBoundary(DomainError):
    code = "path_outside_boundary"


class GovernanceBlocked(DomainError):
    code = "governance_blocked"


@dataclass(frozen=True)
class Workspace:
    """The folder of one team. `ancestors` are the names of its ancestor teams (their org-rules
    reach this team, so they are named as such when a write aims at them)."""

    team: str
    root: Path
    teams_dir: Path
    ancestors: tuple[str, ...] = ()
    # (class name, real path) of folders outside every workspace that no team may write.
    protected: tuple[tuple[str, Path], ...] = field(default_factory=tuple)

    @classmethod
    def for_team(cls, name: str, *, ancestors: Iterable[str] = ()) -> Workspace:
        return cls(
            team=name,
            root=Path(os.path.realpath(paths.team_dir(name))),
            teams_dir=Path(os.path.realpath(paths.teams_dir())),
            ancestors=tuple(ancestors),
            protected=(
                ("system-rules", Path(os.path.realpath(paths.system_rules_dir()))),
                ("admin-org-rules", Path(os.path.realpath(paths.admin_rules_dir()))),
            ),
        )

    # --- resolution ---------------------------------------------------------------------------

    def resolve(self, path: str | None) -> Path:
        """The real path of `path` (relative paths start at the root), refused unless it is the
        root or inside it."""
        real = self._real(path)
        if not self.contains(real):
            raise PathOutsideBoundary(
                f"access denied: {path!r} resolves to {real}, outside the workspace {self.root}"
            )
        return real

    def resolve_for_write(self, path: str | None) -> Path:
        """As `resolve`, and the target must be a place the team may write."""
        real = self._real(path)
        governed = self.governance_class(real)
        if governed is not None:
            raise GovernanceBlocked(
                f"write blocked for {governed} path: {real}. " + _GOVERNANCE_HINTS.get(governed, "")
            )
        if not self.contains(real):
            raise PathOutsideBoundary(
                f"access denied: {path!r} resolves to {real}, outside the workspace {self.root}"
            )
        if real == self.root:
            raise PathOutsideBoundary("the workspace root itself is a folder, not a file")
        return real

    def contains(self, real: Path) -> bool:
        return real == self.root or real.is_relative_to(self.root)

    def governance_class(self, real: Path) -> str | None:
        """The protected class `real` falls in, or None when the team may write it."""
        if self.contains(real):
            return "own-config" if real == self.root / CONFIG_FILE else None
        for name, folder in self.protected:
            if real == folder or real.is_relative_to(folder):
                return name
        if real.is_relative_to(self.teams_dir) and real != self.teams_dir:
            owner = real.relative_to(self.teams_dir).parts[0]
            rest = real.relative_to(self.teams_dir / owner).parts
            if owner in self.ancestors and rest[:1] == ("org-rules",):
                return "inherited-org-rules"
            return "other-team"
        return None

    def relative(self, real: Path) -> str:
        return "." if real == self.root else str(real.relative_to(self.root))

    def _real(self, path: str | None) -> Path:
        text = "" if path is None else str(path)
        if "\x00" in text:
            raise PathOutsideBoundary("access denied: the path contains a NUL byte")
        encoded = text.encode("utf-8", "surrogateescape")
        if len(encoded) > MAX_PATH_BYTES:
            raise PathOutsideBoundary(f"access denied: the path is over {MAX_PATH_BYTES} bytes")
        if any(
            len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES
            for part in text.split("/")
        ):
            raise PathOutsideBoundary(
                f"access denied: a name in the path is over {MAX_NAME_BYTES} bytes"
            )
        candidate = Path(text).expanduser() if text.startswith("~") else Path(text)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        # Non-strict realpath resolves every existing component (symlinks included) and keeps
        # the missing tail as written, so `..` after a symlink is applied to its target.
        return Path(os.path.realpath(candidate))

    # --- race-safe access ---------------------------------------------------------------------

    def open_read(self, real: Path) -> int:
        """A read descriptor of the regular file at `real` (already resolved)."""
        parent_fd = self._walk(real.parent, create=False)
        try:
            try:
                fd = os.open(
                    real.name,
                    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    dir_fd=parent_fd,
                )
            except OSError as exc:
                raise _os_error(exc, real) from exc
        finally:
            os.close(parent_fd)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise _not_regular(real, mode)
        return fd

    def write_atomic(self, real: Path, data: bytes) -> bool:
        """Write `data` to `real` (already resolved for writing) through a temporary file and a
        rename inside the same folder, creating missing folders. Returns whether it is new."""
        parent_fd = self._walk(real.parent, create=True)
        temp = f".{real.name[:200]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            mode = 0o644
            created = True
            try:
                existing = os.stat(real.name, dir_fd=parent_fd, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            if existing is not None:
                if not stat.S_ISREG(existing.st_mode):
                    raise _not_regular(real, existing.st_mode)
                mode, created = stat.S_IMODE(existing.st_mode), False
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                mode,
                dir_fd=parent_fd,
            )
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(temp, real.name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            except BaseException:
                _unlink_quietly(temp, parent_fd)
                raise
            return created
        finally:
            os.close(parent_fd)

    def _walk(self, folder: Path, *, create: bool) -> int:
        """A descriptor of `folder`, reached from the root one name at a time without following
        any symlink (and creating missing folders when asked)."""
        if not self.contains(folder):
            raise PathOutsideBoundary(f"access denied: {folder} is outside the workspace")
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in folder.relative_to(self.root).parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    next_fd = os.open(
                        part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                    )
                except OSError as exc:
                    raise _os_error(exc, folder) from exc
                os.close(fd)
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd


_GOVERNANCE_HINTS = {
    "own-config": "A team's config.yaml is set by its parent or the operator, never by the "
    "team itself.",
    "system-rules": "System rules ship with OpenHive and are read-only.",
    "admin-org-rules": "Organisation rules are the operator's.",
    "inherited-org-rules": "Org rules inherited from an ancestor team are that team's to change.",
    "other-team": "Each team writes only its own workspace; use send_message to ask another team.",
}


def _not_regular(real: Path, mode: int) -> PathOutsideBoundary:
    kind = "a folder" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
    return PathOutsideBoundary(f"access denied: {real} is {kind}, not a regular file")


def _os_error(exc: OSError, real: Path) -> DomainError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) or exc.errno == errno.EMLINK:
        # A symlink appeared where the checked path had none: refuse rather than follow it.
        return PathOutsideBoundary(f"access denied: {real} changed while it was opened")
    if exc.errno == errno.ENOENT:
        return DomainError(f"file not found: {real}", code="not_found")
    if exc.errno == errno.EISDIR:
        return PathOutsideBoundary(f"access denied: {real} is a folder, not a regular file")
    return DomainError(f"cannot open {real}: {exc.strerror}", code="io_error")


def _unlink_quietly(name: str, dir_fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)

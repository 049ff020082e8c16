"""Workspace search tools: glob and grep, in pure Python (no `rg` or other binary a fresh
machine may lack). Both walk the workspace without following symlinked folders, and skip any
file whose real path leaves the workspace."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.guards.workspace import PathOutsideBoundary, Workspace
from openhive.core.registry import tool
from openhive.core.scrubbing import get_scrubber

from .workspaces import team_workspace

MAX_GLOB_RESULTS = 500
MAX_ENTRIES_WALKED = 50_000
GREP_SECONDS = 20.0
MAX_GREP_FILE_BYTES = 20 * 1024 * 1024
MAX_MATCH_LINE_CHARS = 300


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled matcher for a glob over `/`-separated relative paths: `*` and `?` stay within
    one name, `**` spans folders, `[...]` is a character class, `{a,b}` alternatives."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "{":
            end = pattern.find("}", i)
            if end == -1:
                out.append(re.escape(c))
            else:
                options = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(glob_regex(o).pattern[4:-3] for o in options) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("(?s:" + "".join(out) + r")\Z")


def _check_pattern(pattern: str) -> None:
    if pattern.startswith("/") or ".." in pattern.split("/") or "\x00" in pattern:
        raise PathOutsideBoundary(
            "glob patterns are relative to the search folder and may not contain '..' or start "
            "with '/'"
        )


def _walk(workspace: Workspace, base: Path, *, hidden: bool) -> Iterator[tuple[Path, str]]:
    """(real path, path relative to `base`) of every regular file under `base` that stays in
    the workspace. Symlinked folders are not entered; symlinked files are judged by target."""
    walked = 0
    for folder, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if hidden or not d.startswith("."))
        for name in sorted(files):
            walked += 1
            if walked > MAX_ENTRIES_WALKED:
                raise _WalkLimit()
            if not hidden and name.startswith("."):
                continue
            path = Path(folder) / name
            real = Path(os.path.realpath(path)) if path.is_symlink() else path
            if not workspace.contains(real) or not real.is_file():
                continue
            yield real, str(path.relative_to(base))


class _WalkLimit(Exception):
    pass


class _Enough(Exception):
    pass


class GlobArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(min_length=1, description="Glob such as `**/*.md` or `reports/*.txt`")
    path: str = Field(default=".", description="Folder to search, relative to your workspace")


@tool(
    name="glob",
    description=(
        "Find files in your workspace by name pattern (`**` spans folders, `{a,b}` "
        "alternatives). Files only, newest first."
    ),
    args=GlobArgs,
)
def glob_tool(ctx: ToolContext, args: GlobArgs) -> dict:
    _check_pattern(args.pattern)
    workspace = team_workspace(ctx)
    base = workspace.resolve(args.path)
    if not base.is_dir():
        raise DomainError(f"{workspace.relative(base)} is not a folder", code="not_a_folder")
    matcher = glob_regex(args.pattern)
    hidden = any(part.startswith(".") for part in args.pattern.split("/"))
    found: list[tuple[float, str]] = []
    note = ""
    try:
        for real, relative in _walk(workspace, base, hidden=hidden):
            if matcher.match(relative):
                found.append((real.stat().st_mtime, workspace.relative(base / relative)))
    except _WalkLimit:
        note = f"stopped after {MAX_ENTRIES_WALKED} files; narrow the path"
    found.sort(key=lambda item: (-item[0], item[1]))
    files = [name for _, name in found[:MAX_GLOB_RESULTS]]
    result: dict = {"files": files, "count": len(found), "truncated": len(found) > len(files)}
    if not files:
        result["message"] = "No files matched the pattern."
    if note:
        result["note"] = note
    return result


def _read_small(workspace: Workspace, real: Path) -> bytes | None:
    """The file's bytes through the race-safe open, or None if it is too big or unreadable."""
    try:
        fd = workspace.open_read(real)
    except DomainError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > MAX_GREP_FILE_BYTES:
            return None
        return handle.read(MAX_GREP_FILE_BYTES)


class GrepArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(min_length=1, description="Regular expression (Python syntax)")
    path: str = Field(default=".", description="File or folder to search, in your workspace")
    glob: str | None = Field(default=None, description="Only files whose path matches this glob")
    ignore_case: bool = Field(default=False, description="Case-insensitive match")
    max_results: int = Field(default=100, ge=1, le=1000, description="Most matching lines")


@tool(
    name="grep",
    description=(
        "Search the text files of your workspace for a regular expression; returns "
        "`path:line: text` for each matching line."
    ),
    args=GrepArgs,
)
def grep_tool(ctx: ToolContext, args: GrepArgs) -> dict:
    import regex  # regular expressions with a timeout; loaded when a team first greps

    try:
        matcher = regex.compile(args.pattern, regex.IGNORECASE if args.ignore_case else 0)
    except regex.error as exc:
        raise DomainError(f"invalid regular expression: {exc}", code="invalid_pattern") from None
    if args.glob:
        _check_pattern(args.glob)
    workspace = team_workspace(ctx)
    base = workspace.resolve(args.path)
    name_filter = glob_regex(args.glob) if args.glob else None
    if base.is_file():
        targets: Iterator[tuple[Path, str]] = iter([(base, base.name)])
    elif base.is_dir():
        targets = _walk(workspace, base, hidden=False)
    else:
        raise DomainError(f"{workspace.relative(base)} does not exist", code="not_found")
    deadline = time.monotonic() + GREP_SECONDS
    lines: list[str] = []
    searched, note = 0, ""
    try:
        for real, relative in targets:
            if name_filter is not None and not name_filter.match(relative):
                continue
            data = _read_small(workspace, real)
            if data is None or b"\x00" in data[:8192]:
                continue
            searched += 1
            shown = workspace.relative(real)
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                if matcher.search(line, timeout=remaining):
                    lines.append(f"{shown}:{number}: {line[:MAX_MATCH_LINE_CHARS]}")
                    if len(lines) >= args.max_results:
                        raise _Enough()
    except _Enough:
        note = f"stopped at {args.max_results} matching lines"
    except _WalkLimit:
        note = f"stopped after {MAX_ENTRIES_WALKED} files; narrow the path"
    except TimeoutError:
        note = f"stopped after {GREP_SECONDS:g} s; narrow the path or simplify the pattern"
    output, _ = get_scrubber().values("\n".join(lines))
    result: dict = {"output": output, "count": len(lines), "files_searched": searched}
    if not lines:
        result["message"] = "No matches found."
    if note:
        result["note"] = note
        result["truncated"] = True
    return result

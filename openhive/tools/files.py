"""Workspace file tools: read_file, write_file, edit_file (glob and grep: `filesearch.py`).

Every path goes through the workspace guard (realpath containment: PATH_OUTSIDE_BOUNDARY;
write governance: GOVERNANCE_BLOCKED). Files are written whole through a temporary file and a
rename, so a reader never sees half a file, and with every known secret value replaced: a
secret never lands in a file the team could later hand to a model."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.registry import tool
from openhive.core.scrubbing import get_scrubber

from .workspaces import team_workspace

MAX_WRITE_CHARS = 10 * 1024 * 1024
MAX_READ_OUTPUT_CHARS = 256 * 1024
MAX_LINE_CHARS = 2000
MAX_READ_FILE_BYTES = 50 * 1024 * 1024
SNIFF_BYTES = 8192


class ReadFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path, relative to your workspace (or absolute inside it)")
    offset: int = Field(default=1, ge=1, description="First line to show (1-based)")
    limit: int = Field(default=2000, ge=1, le=10_000, description="How many lines to show")


def read_text(fd: int, path: str) -> bytes:
    """The file's bytes, refusing binary content (a NUL byte near the start)."""
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_READ_FILE_BYTES:
            raise DomainError(
                f"{path} is {size} bytes, over the {MAX_READ_FILE_BYTES // 1024 // 1024} MiB the "
                "file tools handle; use bash (head, tail, sed -n) to read parts of it",
                code="too_large",
            )
        data = handle.read(MAX_READ_FILE_BYTES)
    if b"\x00" in data[:SNIFF_BYTES]:
        raise DomainError(
            f"{path} is a binary file ({len(data)} bytes); use bash to inspect it (for example "
            "`file` or `xxd | head`)",
            code="binary_file",
        )
    return data


@tool(
    name="read_file",
    description=(
        "Read a text file of your workspace, with line numbers. Use offset and limit for long "
        "files; the result says where to continue."
    ),
    args=ReadFileArgs,
)
def read_file_tool(ctx: ToolContext, args: ReadFileArgs) -> dict:
    workspace = team_workspace(ctx)
    real = workspace.resolve(args.path)
    shown = workspace.relative(real)
    text = read_text(workspace.open_read(real), shown).decode("utf-8", "replace")
    text, redacted = get_scrubber().values(text)
    lines = text.splitlines()
    out: list[str] = []
    size = 0
    end = args.offset - 1
    for number in range(args.offset, min(len(lines), args.offset + args.limit - 1) + 1):
        line = lines[number - 1]
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + " [line cut]"
        size += len(line) + 8
        if size > MAX_READ_OUTPUT_CHARS and out:
            break
        out.append(f"{number:>6}\t{line}")
        end = number
    result: dict = {
        "path": shown,
        "content": "\n".join(out),
        "total_lines": len(lines),
        "first_line": args.offset if out else None,
        "last_line": end if out else None,
    }
    if end < len(lines):
        result["next_offset"] = end + 1
    if not out:
        result["note"] = (
            "the file is empty" if not lines else f"the file has only {len(lines)} lines"
        )
    if redacted:
        result["redacted_secrets"] = redacted
    return result


class WriteFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path, relative to your workspace; folders are created")
    content: str = Field(description="The whole new content of the file")


@tool(
    name="write_file",
    description=(
        "Create or overwrite a text file in your workspace with the given content (missing "
        "folders are created). Your config.yaml and rules outside your workspace are read-only."
    ),
    args=WriteFileArgs,
)
def write_file_tool(ctx: ToolContext, args: WriteFileArgs) -> dict:
    if len(args.content) > MAX_WRITE_CHARS:
        raise DomainError(
            f"content is longer than {MAX_WRITE_CHARS} characters; split it into several files",
            code="too_large",
        )
    workspace = team_workspace(ctx)
    real = workspace.resolve_for_write(args.path)
    content, redacted = get_scrubber().values(args.content)
    data = content.encode("utf-8")
    created = workspace.write_atomic(real, data)
    shown = workspace.relative(real)
    result: dict = {
        "path": shown,
        "bytes": len(data),
        "created": created,
        "message": f"Wrote {len(data)} bytes to {shown}",
    }
    if redacted:
        result["redacted_secrets"] = redacted
        result["message"] += (
            f"; {redacted} secret value(s) were replaced by [REDACTED]: read secrets with "
            "vault_get where they are needed, never store them"
        )
    return result


class EditFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path, relative to your workspace")
    old_string: str = Field(min_length=1, description="Exact text to replace")
    new_string: str = Field(description="Replacement text")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence (else it must occur exactly once)"
    )


@tool(
    name="edit_file",
    description=(
        "Replace an exact piece of text in a workspace file. old_string must match exactly "
        "(whitespace included) and occur once, unless replace_all is true."
    ),
    args=EditFileArgs,
)
def edit_file_tool(ctx: ToolContext, args: EditFileArgs) -> dict:
    if args.old_string == args.new_string:
        raise DomainError("old_string and new_string are the same; nothing to do")
    workspace = team_workspace(ctx)
    real = workspace.resolve_for_write(args.path)
    shown = workspace.relative(real)
    text = read_text(workspace.open_read(real), shown).decode("utf-8", "replace")
    count = text.count(args.old_string)
    if count == 0:
        raise DomainError(
            f"old_string not found in {shown}. It must match exactly, including whitespace and "
            "indentation; read_file shows the current text.",
            code="no_match",
        )
    if count > 1 and not args.replace_all:
        raise DomainError(
            f"old_string occurs {count} times in {shown}; add surrounding lines to make it "
            "unique, or set replace_all",
            code="ambiguous_match",
        )
    updated = text.replace(args.old_string, args.new_string)
    updated, redacted = get_scrubber().values(updated)
    workspace.write_atomic(real, updated.encode("utf-8"))
    result: dict = {
        "path": shown,
        "replacements": count,
        "message": f"Replaced {count} occurrence(s) in {shown}",
    }
    if redacted:
        result["redacted_secrets"] = redacted
    return result

"""A team's subagents: `subagents/{name}.md` in its workspace, the WHO of the team's work.

A file is a YAML front matter and a markdown body:

    ---
    description: Checks disks and cleans up build servers     # required, one line
    tools: [read_file, bash, "plugin__*"]                     # optional: globs; default all
    provider_profile: fast                                    # optional; default the team's
    ---
    You are the disk keeper of the ops team. ...               # identity and boundaries

The orchestrator runs a subagent on a piece of work with `run_subagent`; a trigger that names
a subagent runs it directly. Either way the subagent works in a child session of its own
(`Session.kind == "subagent"`, `agent_name`), linked to the session and task it serves.
Loading is pure: it reads files and never writes."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openhive.core import paths
from openhive.core.errors import DomainError, NotAllowed, NotFound

from .models import MAIN_TEAM

logger = logging.getLogger(__name__)

# The one tool an orchestrator runs a subagent with.
RUN_SUBAGENT = "run_subagent"
# How deep subagents may nest: the orchestrator's subagent is depth 1, a subagent it starts
# is depth 2, and a session at the cap is not offered `run_subagent` (and refused if it asks).
MAX_DEPTH = 2
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_FILE_BYTES = 64_000
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class InvalidSubagent(DomainError):
    code = "invalid_subagent"


class _FrontMatter(BaseModel):
    # A misspelt key (`tool:`) must not silently give the subagent every tool.
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str = Field(min_length=1, max_length=1000)
    tools: list[str] | None = None
    provider_profile: str | None = Field(default=None, min_length=1, max_length=100)


@dataclass(frozen=True)
class Subagent:
    name: str
    description: str
    # Tool-name globs the subagent may use, within the team's allowlist; None: all of them.
    tools: tuple[str, ...] | None
    provider_profile: str | None
    body: str

    def admits(self, tool_name: str) -> bool:
        return self.tools is None or any(fnmatchcase(tool_name, p) for p in self.tools)


def subagents_dir(team_name: str) -> Path:
    return paths.team_dir(team_name) / "subagents"


def parse_subagent(name: str, text: str) -> Subagent:
    """A subagent from its file's text; `InvalidSubagent` says what to fix."""
    if not NAME_PATTERN.match(name):
        raise InvalidSubagent(
            f'subagent file name "{name}" must be a lowercase slug (a-z, 0-9, hyphens)'
        )
    where = f"subagents/{name}.md"
    found = _FRONT_MATTER.match(text)
    if found is None:
        raise InvalidSubagent(
            f"{where} must start with a front matter block: a line `---`, `description: ...` "
            "(and optionally `tools: [...]`, `provider_profile: ...`), a line `---`, then the body"
        )
    try:
        data = yaml.safe_load(found.group(1)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 2}" if mark else ""
        raise InvalidSubagent(f"{where}: the front matter is not valid YAML{at}") from None
    if not isinstance(data, dict):
        raise InvalidSubagent(f"{where}: the front matter must be a mapping of keys")
    try:
        meta = _FrontMatter.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'front matter'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise InvalidSubagent(f"{where}: {problems}") from None
    if meta.name is not None and meta.name != name:
        raise InvalidSubagent(f'{where}: name "{meta.name}" differs from the file name "{name}"')
    body = text[found.end() :].strip()
    if not body:
        raise InvalidSubagent(f"{where}: the body (who the subagent is, its boundaries) is empty")
    tools = None
    if meta.tools is not None:
        tools = tuple(t.strip() for t in meta.tools if t.strip())
    return Subagent(
        name=name,
        description=" ".join(meta.description.split()),
        tools=tools,
        provider_profile=meta.provider_profile,
        body=body,
    )


def _read(path: Path) -> str:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InvalidSubagent(f"subagents/{path.name} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidSubagent(f"subagents/{path.name} is not UTF-8 text") from None


def subagent_names(team_name: str) -> list[str]:
    folder = subagents_dir(team_name)
    if team_name == MAIN_TEAM or not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.md") if p.is_file())


def load_subagent(team_name: str, name: str) -> Subagent:
    """The named subagent of a team, or a clear refusal (the main agent has none)."""
    if team_name == MAIN_TEAM:
        raise NotAllowed("the main agent has no subagents: it routes work to teams")
    available = subagent_names(team_name)
    if name not in available:
        listing = ", ".join(available) if available else "none yet: write subagents/{name}.md"
        raise NotFound(
            f'unknown subagent "{name}" for team "{team_name}" (available: {listing})',
            code="unknown_subagent",
        )
    return parse_subagent(name, _read(subagents_dir(team_name) / f"{name}.md"))


def load_subagents(team_name: str) -> tuple[list[Subagent], list[str]]:
    """Every valid subagent of the team, and one problem line per file that is not valid
    (logged, so an operator sees why a subagent is missing from the list)."""
    found: list[Subagent] = []
    problems: list[str] = []
    for name in subagent_names(team_name):
        try:
            found.append(parse_subagent(name, _read(subagents_dir(team_name) / f"{name}.md")))
        except (InvalidSubagent, OSError) as exc:
            problems.append(str(exc))
    for problem in problems:
        logger.warning("team %s: subagent skipped: %s", team_name, problem)
    return found, problems


def unmatched_tools(subagent: Subagent, team_tool_names: list[str]) -> list[str]:
    """The subagent's tool entries that admit nothing the team may use: they are not offered
    (the team's allowlist always wins), and the loader says so."""
    from fnmatch import fnmatchcase

    return [
        pattern
        for pattern in subagent.tools or ()
        if not any(fnmatchcase(name, pattern) for name in team_tool_names)
    ]

"""A team's skills (HOW to do a kind of work), in the open Agent Skills layout so that published
skills work unchanged: `skills/{name}/SKILL.md` (other files of the folder are its resources and
scripts) or a single file `skills/{name}.md`, each with `name` and `description` front matter.

Loading validates each skill on its own: a skill with a problem (no front matter, a name that is
not its folder's, an oversized body, a required tool nobody declares) is left out with a clear
error for the operator and the team, and every other skill still works. Our own body sections
(Purpose, Steps, Inputs, Outputs, Error Handling) are recommended, not required: a published
skill without them loads with a warning. `## Required Tools` lists the tools activation brings
into the session (those the team's allowlist permits).

The prompt carries only the index (`name — description`); the body reaches a session when it
activates the skill (`openhive.tools.skills`) or when a trigger names the skill for its task."""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISLNK, S_ISREG
from typing import Any

import yaml

from openhive.core import paths
from openhive.core.errors import DomainError, NotFound
from openhive.core.prompt_sections import PromptContext, prompt_section
from openhive.core.registry import get_tool
from openhive.core.scrubbing import scrub

from .models import MAIN_TEAM

SKILLS_FOLDER = "skills"
SKILL_FILE = "SKILL.md"
# The Agent Skills limits for the front matter.
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
# A body is read whole into the context on activation: past this it crowds out the work (the
# Agent Skills guidance is under 500 lines; long material belongs in resource files).
MAX_BODY_CHARS = 40_000
MAX_FILE_BYTES = 256 * 1024
MAX_SKILLS = 200
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Tools that exist only at run time: a team's plugins and its MCP servers' tools.
RUNTIME_PREFIXES = ("plugin__", "mcp__")
RECOMMENDED_SECTIONS = ("Purpose", "Steps", "Inputs", "Outputs", "Error Handling")
REQUIRED_TOOLS_HEADING = "required tools"
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+`?([^`\s,;:\u2013\u2014]+)`?")


class SkillNotFound(NotFound):
    code = "skill_not_found"


class SkillInvalid(DomainError):
    code = "skill_invalid"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    # Where it is, relative to the team's workspace (`skills/x/SKILL.md`, `skills/x.md`).
    path: str
    # The real path of its folder; None for a single-file skill (it has no other files).
    folder: Path | None
    required_tools: tuple[str, ...] = ()
    # The other front matter (license, compatibility, allowed-tools, metadata, ...), as given.
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillProblem:
    name: str
    path: str
    error: str

    def describe(self) -> str:
        return f"{self.path}: {self.error}"


@dataclass(frozen=True)
class SkillCatalog:
    team: str
    skills: dict[str, Skill]
    problems: tuple[SkillProblem, ...] = ()

    def get(self, name: str) -> Skill:
        """The named skill, or an error that says why it cannot be used and what exists."""
        skill = self.skills.get(name)
        if skill is not None:
            return skill
        problem = next((p for p in self.problems if p.name == name), None)
        if problem is not None:
            raise SkillInvalid(
                f'skill "{name}" cannot be used: {problem.describe()}. Fix the file; the other '
                "skills are unaffected."
            )
        available = ", ".join(sorted(self.skills)) or "none"
        raise SkillNotFound(
            f'no skill "{name}" in team "{self.team}" (available: {available}). A skill is '
            "skills/<name>/SKILL.md or skills/<name>.md with name and description front matter."
        )


# --- parsing -----------------------------------------------------------------------------------


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The YAML front matter between the leading `---` lines, and the body after it."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillInvalid(
            "no front matter: the file must start with a `---` line, then `name:` and "
            "`description:`, then a closing `---` line"
        )
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() in ("---", "...")), None)
    if end is None:
        raise SkillInvalid("the front matter is not closed: add a `---` line after it")
    try:
        data = yaml.safe_load("".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise SkillInvalid(f"the front matter is not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise SkillInvalid("the front matter must be a mapping of keys (name, description, ...)")
    return data, "".join(lines[end + 1 :]).strip()


def _sections(body: str) -> dict[str, list[str]]:
    """Lines under each heading (lower-cased title), outside fenced code blocks."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    fenced = False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading is not None:
            current = sections.setdefault(heading.group(2).strip().lower(), [])
            continue
        if current is not None:
            current.append(line)
    return sections


def required_tools(body: str) -> tuple[str, ...]:
    """The tool names listed under `## Required Tools` (`- web_fetch — why`, `` - `bash` ``)."""
    names: list[str] = []
    for line in _sections(body).get(REQUIRED_TOOLS_HEADING, []):
        found = _BULLET.match(line)
        if found is not None and found.group(1) not in names:
            names.append(found.group(1))
    return tuple(names)


def known_tool(name: str) -> bool:
    """Declared in code, or of a kind that exists only at run time (plugins, MCP tools)."""
    if get_tool(name) is not None:
        return True
    return any(name.startswith(p) and len(name) > len(p) for p in RUNTIME_PREFIXES)


def parse_skill(text: str, *, name: str, path: str, folder: Path | None) -> Skill:
    """Validate one skill's file; SkillInvalid names the first thing to fix."""
    meta, body = split_front_matter(text)
    declared = meta.pop("name", None)
    description = meta.pop("description", None)
    if not isinstance(declared, str) or not declared.strip():
        raise SkillInvalid(f"the front matter has no `name` (it must be `{name}`)")
    if declared != name:
        where = "folder" if folder is not None else "file name"
        raise SkillInvalid(f"`name: {declared}` does not match its {where} `{name}`")
    if not isinstance(description, str) or not description.strip():
        raise SkillInvalid(
            "the front matter has no `description`: one line saying what the skill does and "
            "when to use it (it is all a session sees before activating the skill)"
        )
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillInvalid(
            f"the description is {len(description)} characters; keep it under "
            f"{MAX_DESCRIPTION_CHARS} (details belong in the body)"
        )
    if not body:
        raise SkillInvalid("the body is empty: write the instructions after the front matter")
    if len(body) > MAX_BODY_CHARS:
        raise SkillInvalid(
            f"the body is {len(body)} characters, over the {MAX_BODY_CHARS} a session loads; "
            "move reference material into files of the skill folder (read_skill_file)"
        )
    tools = required_tools(body)
    bad = [t for t in tools if not TOOL_NAME.match(t)]
    unknown = [t for t in tools if TOOL_NAME.match(t) and not known_tool(t)]
    if bad or unknown:
        raise SkillInvalid(
            "## Required Tools names unknown tool(s): "
            + ", ".join(sorted({*bad, *unknown}))
            + " (name declared tools, or plugin__<name> / mcp__<server>__<tool>)"
        )
    headings = set(_sections(body))
    missing = [s for s in RECOMMENDED_SECTIONS if s.lower() not in headings]
    warnings = (
        (f"no {', '.join(missing)} section(s); recommended, not required",) if missing else ()
    )
    return Skill(name, description, body, path, folder, tools, meta, warnings)


# --- loading -----------------------------------------------------------------------------------

_cache: dict[str, tuple[tuple, Skill | SkillProblem]] = {}
_cache_lock = threading.Lock()


def skills_dir(team_name: str) -> Path:
    return paths.team_dir(team_name) / SKILLS_FOLDER


def load_skills(team_name: str) -> SkillCatalog:
    """Every skill of the team's `skills/`, each validated on its own. Every session start
    renders the index, so a file costs one `lstat` when unchanged: it is parsed again only
    when its modification time, size or inode changed, and only symlinks are resolved."""
    root = os.path.realpath(paths.team_dir(team_name))
    base = os.path.realpath(skills_dir(team_name))
    if not _within(base, root):
        problem = SkillProblem("", "skills/", "the folder leads outside the team's workspace")
        return SkillCatalog(team_name, {}, (problem,) if os.path.isdir(base) else ())
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return SkillCatalog(team_name, {})
    problems: list[SkillProblem] = []
    candidates: dict[str, tuple[str, bool, str, bool]] = {}
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            shown = f"skills/{entry.name}/{SKILL_FILE}"
            candidates[entry.name] = (entry.path, True, shown, entry.is_symlink())
        elif entry.name.endswith(".md") and entry.name != "README.md":
            name = entry.name[:-3]
            if name in candidates:
                problems.append(
                    SkillProblem(name, f"skills/{entry.name}", "ignored: the folder skill wins")
                )
                continue
            candidates[name] = (entry.path, False, f"skills/{entry.name}", entry.is_symlink())
    skills: dict[str, Skill] = {}
    for name, (path, is_folder, shown, linked) in list(candidates.items())[:MAX_SKILLS]:
        loaded = _load_one(name, path, is_folder, shown, linked, root)
        if isinstance(loaded, Skill):
            skills[name] = loaded
        else:
            problems.append(loaded)
    if len(candidates) > MAX_SKILLS:
        problems.append(
            SkillProblem("", "skills/", f"only the first {MAX_SKILLS} skills (by name) are loaded")
        )
    return SkillCatalog(team_name, skills, tuple(problems))


def _load_one(
    name: str, path: str, is_folder: bool, shown: str, linked: bool, root: str
) -> Skill | SkillProblem:
    outside = SkillProblem(name, shown, "it leads outside the team's workspace (a symlink)")
    folder = os.path.realpath(path) if is_folder and linked else path if is_folder else None
    if folder is not None and (not _within(folder, root) or folder == root):
        return outside
    file = f"{folder}/{SKILL_FILE}" if folder is not None else path
    try:
        stat = os.lstat(file)
        if S_ISLNK(stat.st_mode) or (linked and folder is None):
            file = os.path.realpath(file)
            if not _within(file, root):
                return outside
            stat = os.stat(file)
    except OSError:
        return SkillProblem(name, shown, f"the folder has no {SKILL_FILE}")
    if not S_ISREG(stat.st_mode):
        return SkillProblem(name, shown, "not a regular file")
    if stat.st_size > MAX_FILE_BYTES:
        return SkillProblem(name, shown, f"the file is {stat.st_size} bytes, over {MAX_FILE_BYTES}")
    key = (stat.st_mtime_ns, stat.st_size, stat.st_ino, folder, name)
    with _cache_lock:
        cached = _cache.get(file)
    if cached is not None and cached[0] == key:
        return cached[1]
    loaded: Skill | SkillProblem
    try:
        if not NAME_PATTERN.match(name) or len(name) > MAX_NAME_CHARS:
            raise SkillInvalid(
                f"`{name}` is not a valid skill name: lowercase letters, digits and single "
                f"hyphens, at most {MAX_NAME_CHARS} characters"
            )
        with open(file, "rb") as handle:
            text = handle.read(MAX_FILE_BYTES + 1).decode("utf-8")
        loaded = parse_skill(
            text, name=name, path=shown, folder=Path(folder) if folder is not None else None
        )
    except UnicodeDecodeError:
        loaded = SkillProblem(name, shown, "the file is not UTF-8 text")
    except OSError as exc:
        loaded = SkillProblem(name, shown, f"cannot be read ({exc.strerror})")
    except SkillInvalid as exc:
        loaded = SkillProblem(name, shown, exc.message)
    with _cache_lock:
        _cache[file] = (key, loaded)
    return loaded


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def load_skill(team_name: str, name: str) -> Skill:
    return load_skills(team_name).get(name)


def skills_summary(team_name: str) -> dict:
    """The team's skills and what is wrong with them, for the operator's doors (admin, API):
    workspace-relative paths only, never a body."""
    catalog = load_skills(team_name)
    return {
        "skills": [
            {
                "name": s.name,
                "description": scrub(s.description),
                "path": s.path,
                "required_tools": list(s.required_tools),
                "warnings": list(s.warnings),
            }
            for s in catalog.skills.values()
        ],
        "problems": [{"path": p.path, "error": scrub(p.error)} for p in catalog.problems],
    }


def skill_problems(team_name: str) -> list[str]:
    """What the operator should fix in the team's skills (warnings included), one per line,
    with workspace-relative paths only."""
    catalog = load_skills(team_name)
    lines = [p.describe() for p in catalog.problems]
    for skill in catalog.skills.values():
        lines += [f"{skill.path}: warning: {w}" for w in skill.warnings]
    return lines


# --- delivery ----------------------------------------------------------------------------------


def skill_instructions(skill: Skill) -> str:
    """The body as a session receives it (secrets scrubbed: a team may have pasted one)."""
    return scrub(skill.body)


def with_skill(team_name: str, name: str, content: str) -> str:
    """A task's text with the named skill's instructions after it: how a trigger that names a
    skill delivers the body to that run. SkillNotFound / SkillInvalid if it cannot be used."""
    skill = load_skill(team_name, name)
    return (
        f"{content}\n\n--- Skill `{skill.name}` (given with this task: follow it) ---\n"
        f"{skill_instructions(skill)}"
    )


# --- the prompt's index ------------------------------------------------------------------------

SKILLS_INDEX = "skills-index"
MAX_PROBLEM_CHARS = 300


@prompt_section(SKILLS_INDEX, order=40)
def skills_index_section(ctx: PromptContext) -> str:
    """One line per skill (never a body); the main team routes only and has none."""
    if ctx.team.name == MAIN_TEAM:
        return ""
    offered = ctx.data.get("tool-names")  # teams.prompt.TOOL_NAMES: this session's tools
    if offered is not None and "activate_skill" not in offered:
        return ""
    catalog = load_skills(ctx.team.name)
    if not catalog.skills and not catalog.problems:
        return ""
    lines = [
        "## Skills",
        "",
        "Procedures in your `skills/`. Before doing work a skill covers, call "
        "`activate_skill(name)`: it returns the instructions and brings in the skill's tools. "
        "`list_skill_files`, `read_skill_file` and `run_skill_script` reach its other files.",
        "",
    ]
    lines += [f"- {s.name} — {s.description}" for s in catalog.skills.values()]
    if not catalog.skills:
        lines.append("(no usable skills)")
    if catalog.problems:
        lines += ["", "Skills that could not be loaded (fix the file):"]
        lines += [f"- {p.describe()[:MAX_PROBLEM_CHARS]}" for p in catalog.problems]
    # A team may have pasted a secret into a description: scrubbed once, for the whole index.
    return scrub("\n".join(lines))

"""The skill tools: `activate_skill` (the body, and the skill's required tools for the rest of
the session), `list_skill_files`, `read_skill_file` (contained in the skill's folder) and
`run_skill_script` (in the same sandbox as `bash`). Skills are loaded and validated by
`teams.skills`; the prompt carries only their index."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from openhive.core import paths, sandbox
from openhive.core.context import ToolContext
from openhive.core.errors import DomainError, NotAllowed
from openhive.core.guards.workspace import PathOutsideBoundary, Workspace
from openhive.core.registry import team_tools, tool
from openhive.core.scrubbing import get_scrubber
from teams.config import load_team_config
from teams.models import MAIN_TEAM
from teams.skills import Skill, load_skill, skill_instructions

from .files import read_text
from .shell import DEFAULT_TIMEOUT, MAX_TIMEOUT, run_in_workspace

logger = logging.getLogger(__name__)

# Where a session's activations are reported (SessionOutcome.effects).
ACTIVATED = "skills_activated"
MAX_LISTED_FILES = 500
MAX_READ_CHARS = 256 * 1024
MAX_SCRIPT_ARGS = 50
# How a script is run, by its suffix; anything else must be executable itself.
INTERPRETERS = {
    ".py": "python3",
    ".sh": "bash",
    ".bash": "bash",
    ".js": "node",
    ".mjs": "node",
}


class SkillNameArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="The skill's name (the index)")


def _skill(ctx: ToolContext, name: str) -> Skill:
    if ctx.team.name == MAIN_TEAM:
        raise NotAllowed(
            "the main team routes work and has no skills: delegate the work to a team",
            code="not_allowed",
        )
    return load_skill(ctx.team.name, name)


@tool(
    name="activate_skill",
    description=(
        "Load a skill from the Skills index: returns its instructions, and offers the tools it "
        "requires (those your allowlist permits) from your next step on. Activate a skill "
        "before doing work it covers, then follow it."
    ),
    args=SkillNameArgs,
)
def activate_skill_tool(ctx: ToolContext, args: SkillNameArgs) -> dict:
    skill = _skill(ctx, args.name)
    wanted = list(skill.required_tools)
    permitted = {
        spec.name: spec
        for spec in team_tools(ctx.team, load_team_config(ctx.team.name).allowed_tools, only=wanted)
    }
    added = [name for name in wanted if name in permitted and name not in ctx.tools]
    for name in added:
        ctx.tools[name] = permitted[name]
    activated = ctx.effects.setdefault(ACTIVATED, [])
    if skill.name not in activated:
        activated.append(skill.name)
    result: dict = {
        "skill": skill.name,
        "description": skill.description,
        "instructions": skill_instructions(skill),
        "tools_added": added,
        "has_files": skill.folder is not None,
    }
    refused = [name for name in wanted if name not in permitted]
    if refused:
        result["tools_not_permitted"] = refused
        result["note"] = (
            f"{', '.join(refused)} required by the skill are not in your allowed tools (or do "
            "not exist right now); do those steps another way or tell your parent"
        )
    return result


@tool(
    name="list_skill_files",
    description="List the other files of a skill's folder (resources and scripts), with sizes.",
    args=SkillNameArgs,
)
def list_skill_files_tool(ctx: ToolContext, args: SkillNameArgs) -> dict:
    skill = _skill(ctx, args.name)
    if skill.folder is None:
        return {"skill": skill.name, "files": [], "note": "a single-file skill has no files"}
    files: list[dict] = []
    cut = False
    for folder, dirs, names in os.walk(skill.folder):  # symlinked folders are not entered
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder) / name
            if name.startswith(".") or not path.is_file() or path.is_symlink():
                continue
            if len(files) >= MAX_LISTED_FILES:
                cut = True
                break
            relative = str(path.relative_to(skill.folder))
            files.append({"path": relative, "bytes": path.stat().st_size})
    result: dict = {"skill": skill.name, "files": files}
    if cut:
        result["note"] = f"only the first {MAX_LISTED_FILES} files are listed"
    return result


class ReadSkillFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="The skill's name")
    path: str = Field(
        min_length=1, max_length=4096, description="File path relative to the skill's folder"
    )


def _skill_folder(skill: Skill) -> Workspace:
    """The skill's folder as a boundary of its own: nothing outside it is reachable."""
    if skill.folder is None:
        raise DomainError(
            f'"{skill.name}" is a single-file skill ({skill.path}); it has no other files',
            code="no_skill_files",
        )
    return Workspace(
        team=skill.name,
        root=skill.folder,
        teams_dir=Path(os.path.realpath(paths.teams_dir())),
    )


def _resolve(skill: Skill, path: str) -> tuple[Workspace, Path]:
    folder = _skill_folder(skill)
    try:
        return folder, folder.resolve(path)
    except PathOutsideBoundary:
        raise PathOutsideBoundary(
            f"access denied: {path!r} is outside the folder of skill {skill.name} "
            f"({skill.path.rsplit('/', 1)[0]}/); give a path inside it"
        ) from None


@tool(
    name="read_skill_file",
    description="Read a text file of a skill's folder (a path relative to that folder).",
    args=ReadSkillFileArgs,
)
def read_skill_file_tool(ctx: ToolContext, args: ReadSkillFileArgs) -> dict:
    skill = _skill(ctx, args.name)
    folder, real = _resolve(skill, args.path)
    shown = folder.relative(real)
    text = read_text(folder.open_read(real), shown).decode("utf-8", "replace")
    text, redacted = get_scrubber().values(text)
    result: dict = {"skill": skill.name, "path": shown, "content": text[:MAX_READ_CHARS]}
    if len(text) > MAX_READ_CHARS:
        result["truncated"] = True
        result["note"] = f"cut at {MAX_READ_CHARS} characters; run_skill_script can process it"
    if redacted:
        result["redacted_secrets"] = redacted
    return result


class RunSkillScriptArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="The skill's name")
    script: str = Field(
        min_length=1,
        max_length=4096,
        description="Script path relative to the skill's folder, e.g. scripts/report.py",
    )
    args: list[str] | None = Field(
        None, max_length=MAX_SCRIPT_ARGS, description="Command-line arguments"
    )
    stdin: str | None = Field(None, max_length=1_000_000, description="Text sent to its input")
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT, ge=1, le=MAX_TIMEOUT, description="Stop it after this long"
    )


def _argv(skill: Skill, script: str, real: Path) -> list[str]:
    interpreter = INTERPRETERS.get(real.suffix.lower())
    if interpreter is None:
        if os.access(real, os.X_OK):
            return [str(real)]
        raise DomainError(
            f"cannot tell how to run {script}: use a .py, .sh or .js script, or make it "
            "executable with a #! line",
            code="invalid_script",
        )
    binary = shutil.which(interpreter, path=sandbox.SYSTEM_PATH)
    if binary is None:
        raise DomainError(
            f"{interpreter} is not installed on this machine, so {script} cannot run",
            code="interpreter_missing",
        )
    return [binary, str(real)]


@tool(
    name="run_skill_script",
    description=(
        "Run a script of a skill's folder (.py, .sh, .js or executable) in the same sandbox as "
        "bash: your workspace is its working folder, no network. SKILL_DIR names the folder."
    ),
    args=RunSkillScriptArgs,
)
def run_skill_script_tool(ctx: ToolContext, args: RunSkillScriptArgs) -> dict:
    skill = _skill(ctx, args.name)
    _, real = _resolve(skill, args.script)
    if not real.is_file():
        raise DomainError(
            f"{args.script} is not a file of skill {skill.name}; list_skill_files shows them",
            code="not_found",
        )
    scrubber = get_scrubber()
    given = [*(args.args or []), args.stdin or ""]
    if any(secret in text for secret in scrubber.secrets for text in given):
        raise DomainError(
            "the arguments contain a secret value from the vault; scripts never receive "
            "secrets (use web_fetch with {{vault:key}} headers for authenticated calls)",
            code="secret_detected",
        )
    argv = [*_argv(skill, args.script, real), *(args.args or [])]
    run = run_in_workspace(
        ctx,
        argv,
        timeout=args.timeout_seconds,
        what="skill scripts",
        things="scripts",
        stdin=args.stdin.encode() if args.stdin is not None else None,
        env={"SKILL_DIR": str(skill.folder)},
    )
    result: dict = {
        "skill": skill.name,
        "script": args.script,
        "exit_code": run.exit_code,
        "stdout": scrubber.text(run.stdout),
        "stderr": scrubber.text(run.stderr),
        "duration_ms": run.duration_ms,
        "sandboxed": run.sandboxed,
    }
    if run.truncated:
        result["truncated"] = True
    if run.status in ("timeout", "output_limit"):
        result.update(success=False, code=run.status.upper(), error=f"the script was {run.reason}")
    elif run.exit_code != 0:
        result.update(success=False, error=f"the script exited with status {run.exit_code}")
    return result

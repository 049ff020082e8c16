"""Writing skills into a team's workspace, as a team or an operator would."""

from __future__ import annotations

from pathlib import Path

import yaml

from openhive.core import paths

OUR_BODY = """## Purpose
Write the weekly disk report.

## Steps
1. Run `scripts/usage.py`.
2. Summarise it.

## Inputs
The servers to check.

## Outputs
A short report.

## Error Handling
Say which server could not be read.

## Required Tools
- bash — for the checks
- `web_fetch`: the status page
"""


def write_skill(
    team: str,
    name: str,
    *,
    description: str | None = "Weekly disk report for the ops servers",
    body: str = OUR_BODY,
    single_file: bool = False,
    front: dict | None = None,
    raw: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """`skills/{name}/SKILL.md` (or `skills/{name}.md`) with front matter and a body; `raw`
    replaces the whole file; `files` adds resource files to the folder."""
    folder = paths.team_dir(team) / "skills"
    target = folder / f"{name}.md" if single_file else folder / name / "SKILL.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    if raw is None:
        meta = {"name": name, **({"description": description} if description else {})}
        meta.update(front or {})
        raw = f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n{body}"
    target.write_text(raw)
    for relative, content in (files or {}).items():
        path = target.parent / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return target

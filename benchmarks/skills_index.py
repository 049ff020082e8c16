"""What skills cost a session's start: building a team's system prompt with N skills in its
`skills/` (the one-line index; every SKILL.md checked for changes, parsed again only when it
changed) against the same team's prompt with no skills, measured in the same run (interleaved).
Also the cold load (every file parsed and validated) once.

    uv run python benchmarks/skills_index.py [--skills 100] [--runs 300]

Goal: <= 2 ms p50 added by 100 skills to building the prompt.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="openhive-bench-"))
os.environ["OPENHIVE_DATA_DIR"] = str(WORK / "data")
os.environ["OPENHIVE_RUN_DIR"] = str(WORK / "run")
os.environ.pop("DATABASE_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openhive.settings")

BODY = (
    """## Purpose
Check one thing and report it.

## Steps
1. Read the inputs.
2. Run the check with bash.
3. Write the report.

## Inputs
What to check.

## Outputs
A short report.

## Error Handling
Say what could not be checked.

## Required Tools
- bash
- web_fetch
"""
    + "Background detail that a body carries.\n" * 60
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skills", type=int, default=100)
    parser.add_argument("--runs", type=int, default=300)
    options = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from openhive.core import paths
    from teams.config import default_config, write_team_config
    from teams.models import Team
    from teams.prompt import TOOL_NAMES, build_system_prompt
    from teams.services import team_ensure_main, team_workspace_scaffold
    from teams.skills import load_skills

    call_command("migrate", verbosity=0)
    main_team = team_ensure_main()
    teams = {}
    for name in ("bare", "skilled"):
        teams[name], _ = Team.objects.get_or_create(name=name, defaults={"parent": main_team})
        team_workspace_scaffold(paths.team_dir(name))
        write_team_config(default_config(name, parent="main"))
    for i in range(options.skills):
        folder = paths.team_dir("skilled") / "skills" / f"skill-{i:03d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i:03d}\ndescription: Check number {i} of the ops servers and "
            f"report it.\n---\n{BODY}"
        )
    data = {TOOL_NAMES: ["activate_skill", "bash", "web_fetch"]}

    started = time.perf_counter()
    catalog = load_skills("skilled")
    cold_ms = (time.perf_counter() - started) * 1000
    assert len(catalog.skills) == options.skills, catalog.problems

    times: dict[str, list[float]] = {"no skills": [], f"{options.skills} skills": []}
    for round_ in range(20 + options.runs):
        for label, team in (
            ("no skills", teams["bare"]),
            (f"{options.skills} skills", teams["skilled"]),
        ):
            t0 = time.perf_counter()
            prompt = build_system_prompt(team, data=data)
            if round_ >= 20:
                times[label].append((time.perf_counter() - t0) * 1000)
            assert ("## Skills" in prompt.dynamic_suffix) == (team.name == "skilled")

    print(f"\nBuilding a team's system prompt ({options.runs} runs each, interleaved)")
    base = statistics.median(times["no skills"])
    for label, values in times.items():
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        print(f"  {label:<14} p50 {statistics.median(values):7.3f} ms  p99 {p99:7.3f} ms")
    added = statistics.median(times[f"{options.skills} skills"]) - base
    print(f"  cold load of {options.skills} skills (parse + validate): {cold_ms:.1f} ms")
    verdict = "meets" if added <= 2.0 else "MISSES"
    print(f"  goal: <= 2 ms p50 added by {options.skills} skills: {added:.3f} ms, {verdict} it")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()

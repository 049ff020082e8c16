"""Operator verbs: `tool`, `spawn`, `delegate`, `status`."""

from __future__ import annotations

import json
import textwrap
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory.selectors import vector_index_fit
from openhive.config_report import config_problems
from openhive.core.context import ToolContext
from openhive.core.errors import DomainError
from openhive.core.jobs import registered_jobs
from openhive.core.prompt_sections import registered_sections
from openhive.core.registry import all_tools, team_tools
from openhive.engine.providers import provider_problem
from openhive.engine.selectors import engine_leader
from openhive.engine.tool_calls import call_tool
from openhive.org.services import team_spawn
from tasks.orchestration import OVERLAP_POLICIES, task_delegate
from tasks.selectors import task_counts_by_status, team_status
from tasks.services import priority_from_name
from teams.config import load_team_config
from teams.models import MAIN_TEAM, Team
from teams.selectors import team_get
from teams.services import team_ensure_main
from teams.skills import skill_problems
from triggers.selectors import trigger_status_lines

from .base import Verb


def _team(name: str) -> Team:
    team = team_get(name=name)
    if team is None:
        raise CommandError(f'team "{name}" not found (see `manage.py openhive status`)')
    return team


class Tool(Verb):
    help = (
        "tool <team> [<tool> ['<json>']] [--operator]: call a tool as a team (only the tools "
        "its allowed_tools give its sessions, unless --operator) and print the result; "
        "without <tool>, list the tools the team gets."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("team", help="the team to act as (main, or a spawned team)")
        parser.add_argument(
            "tool",
            nargs="?",
            default="",
            help="the tool to call; leave it out to list the tools this team gets",
        )
        parser.add_argument(
            "arguments",
            nargs="?",
            default="{}",
            help="the tool's arguments as a JSON object (default {})",
        )
        parser.add_argument(
            "--operator",
            action="store_true",
            help="bypass the team's allowlist: any registered tool, as the operator",
        )

    def epilog(self) -> str:
        return (
            "Examples:\n"
            "  manage.py openhive tool main                 # the tools main gets\n"
            "  manage.py openhive tool main list_teams '{\"recursive\": true}'\n"
            + textwrap.fill(
                "Registered tools (a team gets those its allowed_tools match): "
                + ", ".join(sorted(spec.name for spec in all_tools())),
                79,
            )
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        team_ensure_main()
        team = _team(options["team"])
        if options["operator"]:
            allowed = ["*"]
            # On stderr, so stdout stays the result's JSON.
            command.stderr.write(
                f"Operator override: the allowlist of {team.name} is bypassed; any registered "
                "tool may be called."
            )
        else:
            try:
                config = load_team_config(team.name)
            except DomainError as exc:
                raise CommandError(exc.message) from exc
            # Exactly what the team's sessions are offered, run-time tools (its browser, its
            # plugins, its MCP servers' tools) included.
            allowed = [s.name for s in team_tools(team, config.allowed_tools)]
        if not options["tool"]:
            command.stdout.write(
                f"{team.name} gets {len(allowed)} tool(s): " + ", ".join(sorted(allowed))
                if allowed != ["*"]
                else "--operator: every registered tool"
            )
            return
        try:
            offered = {s.name: s for s in team_tools(team, ["*"])}
        except DomainError:  # a broken config: only the declared tools can be called
            offered = {}
        ctx = ToolContext(
            team=team, actor="operator", source_channel="", allowed_tools=allowed, tools=offered
        )
        result = call_tool(ctx, options["tool"], options["arguments"])
        if result.get("code") == "TOOL_NOT_ALLOWED":
            result["error"] += (
                f" (its allowed_tools offer: {', '.join(allowed) or 'none'}; "
                "--operator bypasses the allowlist)"
            )
        command.stdout.write(json.dumps(result, indent=2, default=str))
        if not result.get("success"):
            raise SystemExit(1)


WHO_RUNS_IT = (
    "a running `serve` runs it; without one, start `manage.py openhive worker` (or the engine "
    "loop `openhive engine` together with `manage.py qcluster`: the engine alone only hands "
    "tasks out)"
)


class Spawn(Verb):
    help = (
        "spawn <name> [--parent P] [--description D] [--scope k1,k2]: create a team and queue "
        "its bootstrap task."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "name", help="the new team's name: lowercase letters and digits, words joined by -"
        )
        parser.add_argument(
            "--parent", default=MAIN_TEAM, help=f"the team it reports to (default {MAIN_TEAM})"
        )
        parser.add_argument(
            "--description", default="", help="what the team does (shown to its parent)"
        )
        parser.add_argument(
            "--scope",
            default="",
            help="comma-separated keywords of the work it accepts (e.g. disks,servers)",
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        team_ensure_main()
        spawned = team_spawn(
            parent=_team(options["parent"]),
            name=options["name"],
            description=options["description"],
            scope_accepts=[k for k in options["scope"].split(",") if k.strip()],
            created_by="operator",
        )
        command.stdout.write(
            f"Team {spawned.team.name} created under {options['parent']}; bootstrap task "
            f"#{spawned.bootstrap_task.pk} queued: {WHO_RUNS_IT}."
        )


class Delegate(Verb):
    help = (
        'delegate <team> "<task>" [--priority P] [--overlap allow|skip|replace|confirm]: '
        "queue a task for a team."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("team", help="the team that should do it")
        parser.add_argument("task", help="what to do, in words (quote it)")
        parser.add_argument(
            "--priority",
            default="normal",
            choices=["critical", "high", "normal", "low"],
            help="queue order (default normal)",
        )
        parser.add_argument(
            "--overlap",
            default="allow",
            choices=list(OVERLAP_POLICIES),
            help="when the team already has work in flight: allow (queue behind it, the "
            "default), skip (queue nothing), replace (cancel it, then queue) or confirm (queue "
            "nothing and show it, so you can decide)",
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        team = _team(options["team"])
        outcome = task_delegate(
            team=team,
            text=options["task"],
            priority=priority_from_name(options["priority"]),
            overlap_policy=options["overlap"],
            created_by="operator",
        )
        busy = len(outcome.in_flight)
        out = command.stdout
        if outcome.task is None:
            out.write(f"Not queued: {team.name} has {busy} task(s) in flight:")
            for entry in outcome.in_flight:
                out.write(f"  task #{entry['task_id']} ({entry['type']}, {entry['status']})")
            again = f'manage.py openhive delegate {team.name} "{options["task"]}"'
            if options["priority"] != "normal":
                again += f" --priority {options['priority']}"
            out.write(
                f"To queue it anyway, behind them:  {again} --overlap allow\n"
                f"To cancel them and queue it:      {again} --overlap replace"
            )
            raise SystemExit(1)
        replaced = f"; cancelled {outcome.replaced}" if outcome.replaced else ""
        out.write(
            f"Task #{outcome.task.pk} queued for {team.name} ({options['priority']}; "
            f"{busy} in flight before it{replaced}): {WHO_RUNS_IT}."
        )


class Status(Verb):
    help = (
        "status: the org tree, the queue, the engine leader, the provider and configuration "
        "problems, the triggers, the clock jobs and the prompt sections."
    )

    def run(self, command: BaseCommand, **options: Any) -> None:
        out = command.stdout
        team_ensure_main()
        leader = engine_leader()
        out.write(f"Engine leader: {leader.holder if leader else 'none running'}")
        # The real reason, not "not configured", when the default profile cannot be used.
        problem = provider_problem("default")
        out.write(f"Provider configured: {'no: ' + problem if problem else 'yes'}")
        problems = config_problems()
        index = vector_index_fit()
        index_problem = index.problem() if index is not None else None
        if index_problem:
            problems.append(f"PostgreSQL: {index_problem}")
        if problems:
            out.write("Configuration problems:")
            for problem in problems:
                out.write(f"  {problem}")
        skill_lines = [
            f"  {name}: {line}"
            for name in Team.objects.order_by("name").values_list("name", flat=True)
            for line in skill_problems(name)
        ]
        if skill_lines:
            out.write("Skill problems (those skills are not offered):")
            for line in skill_lines:
                out.write(line)
        counts = task_counts_by_status()
        out.write("Tasks: " + ", ".join(f"{s} {n}" for s, n in counts.items()))
        out.write("Teams:")
        self._tree(out, team_ensure_main(), 0)
        out.write("Triggers:")
        for line in trigger_status_lines():
            out.write(f"  {line}")
        # What the engine loop runs and what every prompt carries, in their declared order.
        jobs = ", ".join(f"{j.name} ({j.every_seconds:g} s)" for j in registered_jobs())
        out.write(f"Clock jobs: {jobs}")
        out.write("Prompt sections: " + ", ".join(s.name for s in registered_sections()))

    def _tree(self, out, team: Team, depth: int) -> None:
        status = team_status(team)
        state = "ready" if team.bootstrapped else "bootstrapping"
        flags = (" SATURATED" if status["saturation"] else "") + (
            " ORG-OP" if status["org_op_pending"] else ""
        )
        out.write(
            f"{'  ' * (depth + 1)}{team.name} [{team.status}, {state}] "
            f"pending {status['queue_depth']}, running {status['active_daily_ops']}/"
            f"{status['max_concurrent_daily_ops']}{flags}"
        )
        for child in team.children.order_by("name"):
            self._tree(out, child, depth + 1)

"""`replay <session>`: run a recorded session again against the current code and rules."""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import UTC, datetime, time
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from openhive.core.errors import ProviderNotConfigured
from openhive.engine.model import ResilientModel
from openhive.engine.models import Session
from openhive.engine.providers import resolve_profile
from openhive.engine.replay import ReplayReport, replay_session, replay_tree, sessions_since
from openhive.engine.selectors import session_get
from openhive.engine.spec import AgentSpec
from tasks.services import tasks_forget_queued_by
from teams.agent import agent_spec_for
from teams.selectors import teammessages_shown_at

from .base import Verb


def spec_for(session: Session) -> AgentSpec:
    """The spec the session would get now, shaped as the recorded one was."""
    options = session.spec_options or {}
    return agent_spec_for(
        session.team,
        only_tools=options.get("only_tools"),
        topic_name=options.get("topic_name"),
        max_turns=options.get("max_turns"),
        skills=options.get("skills") or (),
        inbox=teammessages_shown_at(team=session.team, started_at=session.started_at),
        subagent=options.get("subagent"),
        depth=options.get("depth") or 0,
    )


def forget_own_effects(session: Session) -> None:
    """Inside the replay's rolled-back transaction: the tasks the session queued are gone, as
    they were when it ran (its replay queues them again)."""
    tasks_forget_queued_by(session_id=session.pk)


def replay_options(profile: str = "") -> dict:
    options: dict = {"spec_for": spec_for, "prepare": forget_own_effects}
    if profile:
        try:
            options.update(profile=resolve_profile(profile), model=ResilientModel())
        except ProviderNotConfigured as exc:
            raise CommandError(exc.message) from exc
    return options


def _since(value: str) -> datetime:
    moment = parse_datetime(value)
    if moment is None:
        day = parse_date(value)
        if day is None:
            raise CommandError(f"--since {value!r}: give a date (2026-01-31) or an ISO time")
        moment = datetime.combine(day, time.min)
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


class Replay(Verb):
    help = (
        "replay <session> [--tree] [--profile NAME] | replay --all --since DATE: re-run "
        "recorded sessions with their recorded model replies (rolled back) and report the "
        "first divergence; exit 1 if any."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("session", nargs="?", type=int, help="the session id (admin, Sessions)")
        parser.add_argument("--tree", action="store_true", help="also its child sessions")
        parser.add_argument("--all", action="store_true", help="every session since --since")
        parser.add_argument("--since", default="", help="with --all: date or ISO time")
        parser.add_argument(
            "--profile", default="", help="re-ask this provider profile instead of the recording"
        )

    def run(self, command: BaseCommand, **options: Any) -> None:
        out = command.stdout
        kwargs = replay_options(options["profile"])
        if options["all"]:
            if not options["since"]:
                raise CommandError("--all needs --since DATE")
            reports = [
                replay_session(s, **kwargs) for s in sessions_since(_since(options["since"]))
            ]
            for report in reports:
                out.write(_line(report))
            diverged = [r for r in reports if not r.identical]
            out.write(
                f"{len(reports)} session(s) replayed: {len(reports) - len(diverged)} identical, "
                f"{len(diverged)} diverged"
            )
            if diverged:
                raise SystemExit(1)
            return
        if options["session"] is None:
            raise CommandError("name a session id (or use --all --since DATE)")
        session = session_get(session_id=options["session"])
        if session is None:
            raise CommandError(f"session {options['session']} not found")
        replay = replay_tree if options["tree"] else replay_session
        report = replay(session, **kwargs)
        self._print(out, report, 0)
        problem = report.first_problem()
        if problem is not None:
            out.write(f"First divergence: session #{problem.session_id} ({problem.team})")
            if problem.divergence is not None:
                out.write(problem.divergence.describe())
            raise SystemExit(1)
        out.write("Identical.")

    def _print(self, out, report: ReplayReport, depth: int) -> None:
        out.write("  " * depth + _line(report))
        for child in report.children:
            self._print(out, child, depth + 1)


def _line(report: ReplayReport) -> str:
    head = f"session #{report.session_id} ({report.team}): {report.steps} call(s) replayed"
    if report.identical:
        return f"{head}, identical ({report.stop_reason})"
    what = report.divergence.what if report.divergence else report.error
    step = report.divergence.step if report.divergence else "-"
    return f"{head}, DIVERGED at step {step}: {what}"

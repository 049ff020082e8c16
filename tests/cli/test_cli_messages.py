"""What the command line tells an operator: every verb's --help opens with its summary and
describes each argument, `spawn` and `delegate` say what really runs the task, `delegate
--overlap confirm` says how to confirm, `tool` lists what a team gets, `worker` logs each task
and `reembed` shows its progress."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from openhive.cli import VERBS
from openhive.management.commands.openhive import Command
from tasks.models import Task
from tasks.runner import run_next_task
from tests.e2e.conftest import ROOT
from tests.factories import TeamFactory


def run(*args: str) -> str:
    out = StringIO()
    call_command("openhive", *args, stdout=out)
    return out.getvalue()


def test_openhive_help_lists_exactly_the_verbs_that_exist(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "openhive", "--help"],
        cwd=ROOT,
        env={"OPENHIVE_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    listed = set(re.findall(r"^    ([a-z-]+)\s", result.stdout, re.MULTILINE))
    assert listed == set(VERBS)
    assert "demo" in listed  # the offline scenario is a real verb


def _verb_parsers():
    parser = Command().create_parser("manage.py", "openhive")
    [sub] = [a for a in parser._actions if a.dest == "verb"]
    return sub.choices


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verb_help_shows_its_summary_and_describes_each_argument(verb):
    parser = _verb_parsers()[verb]
    text = parser.format_help()
    summary = " ".join(VERBS[verb].help.split()[:6])
    assert summary in " ".join(text.split())
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{verb}: argument {action.dest} has no description"


def test_tool_help_lists_the_registered_tools():
    text = _verb_parsers()["tool"].format_help()
    assert "list_teams" in text and "spawn_team" in text


@pytest.mark.django_db
def test_tool_without_a_tool_name_lists_the_tools_the_team_gets(main_team):
    output = run("tool", "main")
    assert output.startswith("main gets ")
    assert "list_teams" in output and "spawn_team" in output


@pytest.mark.django_db
def test_spawn_says_what_really_runs_the_bootstrap_task(main_team):
    output = run("spawn", "ops")
    assert "a running `serve` runs it" in output
    assert "manage.py openhive worker" in output
    assert "engine alone only hands tasks out" in output


@pytest.mark.django_db
def test_delegate_with_overlap_confirm_says_how_to_confirm(main_team):
    TeamFactory(name="ops", parent=main_team)
    run("delegate", "ops", "check the disks")
    out = StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command(
            "openhive", "delegate", "ops", "check again", "--overlap", "confirm", stdout=out
        )
    assert exit_.value.code == 1
    output = out.getvalue()
    assert "Not queued: ops has 1 task(s) in flight" in output
    assert re.search(r"task #\d+ \(delegate, pending\)", output)
    assert 'manage.py openhive delegate ops "check again" --overlap allow' in output
    assert 'manage.py openhive delegate ops "check again" --overlap replace' in output


@pytest.mark.django_db
def test_the_worker_logs_one_line_per_task_with_id_team_outcome_and_duration(
    main_team, scripted_provider, caplog
):
    scripted_provider([{"when": {}, "reply": {"content": "ready"}}])
    run("spawn", "ops")  # queues the bootstrap task
    task = Task.objects.get(team__name="ops")
    with caplog.at_level(logging.INFO, logger="tasks.runner"):
        assert run_next_task("w1") == "done"
    lines = [r.getMessage() for r in caplog.records if r.name == "tasks.runner"]
    assert any(re.fullmatch(rf"task #{task.pk} \(ops\) done in \d+\.\d s", line) for line in lines)

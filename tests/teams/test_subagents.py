"""Subagents: the file format, the child session an orchestrator starts with `run_subagent`
(isolated, linked to its parent session and task, tools narrowed, depth capped), through the
real task runner and the scripted provider."""

from __future__ import annotations

import logging

import pytest

from openhive.core import paths
from openhive.core.context import ToolContext
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.engine.tool_calls import call_tool
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.agent import agent_spec_for
from teams.config import load_team_config, write_team_config
from teams.subagents import InvalidSubagent, load_subagents, parse_subagent

# run_task closes stale connections as a worker must, so these tests commit for real.
pytestmark = pytest.mark.django_db(transaction=True)

WRITER = """---
description: Writes short texts on request
tools: [read_file, write_file, "memory_*"]
---
You are the writer of the ops team. You write; you never run commands.
"""


def write_subagent(team: str, name: str, text: str) -> None:
    folder = paths.team_dir(team) / "subagents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(text)


@pytest.fixture
def ops(main_team):
    team = team_spawn(parent=main_team, name="ops", description="Operations").team
    Task.objects.filter(team=team).delete()  # the bootstrap is not what these tests run
    return team


def sent_text(session: Session) -> str:
    """Everything the session sent to the model (system prompt included)."""
    parts = []
    for exchange in LlmExchange.objects.filter(session=session).order_by("turn"):
        parts += [str(m.get("content")) for m in exchange.request_messages]
    return "\n".join(parts)


# --- the file -----------------------------------------------------------------------------------


def test_a_subagent_file_gives_its_description_tools_profile_and_body():
    found = parse_subagent(
        "writer",
        "---\ndescription: Writes  things\ntools: [read_file]\nprovider_profile: fast\n---\n"
        "# Writer\n\nBoundaries: text only.\n",
    )
    assert found.description == "Writes things"
    assert found.tools == ("read_file",) and found.provider_profile == "fast"
    assert found.body == "# Writer\n\nBoundaries: text only."
    assert found.admits("read_file") and not found.admits("bash")
    assert parse_subagent("any", "---\ndescription: x\n---\nbody").tools is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("You are a writer.", "must start with a front matter block"),
        ("---\ntools: [bash]\n---\nbody", "description: Field required"),
        ("---\ndescription: x\ntool: [bash]\n---\nbody", "tool: Extra inputs"),
        ("---\ndescription: [unclosed\n---\nbody", "not valid YAML"),
        ("---\ndescription: x\n---\n\n", "the body"),
        ("---\nname: other\ndescription: x\n---\nbody", 'differs from the file name "writer"'),
        ("---\n- a list\n---\nbody", "must be a mapping"),
    ],
)
def test_a_broken_subagent_file_is_refused_with_what_to_fix(text, problem):
    with pytest.raises(InvalidSubagent) as caught:
        parse_subagent("writer", text)
    assert problem in caught.value.message


def test_broken_files_are_left_out_of_the_list_and_logged(ops, caplog):
    write_subagent("ops", "writer", WRITER)
    write_subagent("ops", "broken", "no front matter")
    with caplog.at_level(logging.WARNING):
        found, problems = load_subagents("ops")
    assert [s.name for s in found] == ["writer"]
    assert len(problems) == 1 and "subagents/broken.md" in problems[0]
    assert "subagents/broken.md" in caplog.text


# --- what a session is offered ------------------------------------------------------------------


def test_an_orchestrator_with_subagents_gets_the_tool_and_the_list(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    spec = agent_spec_for(ops)
    assert "run_subagent" not in {t.name for t in spec.tools}  # nobody to run yet
    write_subagent("ops", "writer", WRITER)
    spec = agent_spec_for(ops)
    assert "run_subagent" in {t.name for t in spec.tools}
    prompt = spec.system_messages[1]["content"]
    assert "## Your subagents" in prompt and "- `writer` — Writes short texts on request" in prompt


def test_the_main_agent_gets_neither_the_tool_nor_the_section(main_team, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    write_subagent("main", "writer", WRITER)
    spec = agent_spec_for(main_team)
    assert "run_subagent" not in {t.name for t in spec.tools}
    assert "Your subagents" not in spec.system_messages[1]["content"]
    result = call_tool(
        ToolContext(team=main_team), "run_subagent", {"name": "writer", "task": "write"}
    )
    assert result["success"] is False and result["code"] == "NOT_ALLOWED"
    assert "main agent has no subagents" in result["error"]


def test_a_subagent_is_offered_the_team_allowlist_narrowed_by_its_tools(
    ops, scripted_provider, caplog
):
    config = load_team_config("ops")
    config.allowed_tools = ["read_file", "glob", "run_subagent", "memory_*"]
    write_team_config(config)
    write_subagent(
        "ops",
        "reader",
        "---\ndescription: Reads\ntools: [read_file, bash, memory_search]\n---\nYou read files.",
    )
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    with caplog.at_level(logging.WARNING):
        spec = agent_spec_for(ops, subagent="reader", depth=1)
    assert sorted(t.name for t in spec.tools) == ["memory_search", "read_file"]
    assert "subagent reader lists tools the team's allowlist does not offer" in caplog.text
    assert "bash" in caplog.text
    prompt = spec.system_messages[1]["content"]
    assert "You are `reader`, a subagent of the team `ops`." in prompt
    assert "--- Subagent: reader ---\n\nYou read files." in prompt
    assert "# Role: subagent" in prompt and "# Role: team" not in prompt
    assert spec.name == "ops/reader"


def test_a_subagent_may_start_another_only_below_the_depth_cap(ops, scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "x"}}])
    write_subagent("ops", "writer", WRITER.replace('"memory_*"', "run_subagent"))
    write_subagent("ops", "checker", "---\ndescription: Checks texts\n---\nYou check.")
    first = agent_spec_for(ops, subagent="writer", depth=1)
    assert "run_subagent" in {t.name for t in first.tools}
    listed = first.system_messages[1]["content"]
    assert "- `checker` — Checks texts" in listed and "- `writer` —" not in listed
    second = agent_spec_for(ops, subagent="writer", depth=2)
    assert "run_subagent" not in {t.name for t in second.tools}


def test_run_subagent_from_a_session_at_the_depth_cap_is_refused(ops, scripted_provider):
    write_subagent("ops", "writer", WRITER)
    deep = Session.objects.create(
        team=ops,
        kind="subagent",
        agent_name="writer",
        spec_options={"subagent": "writer", "depth": 2},
    )
    ctx = ToolContext(team=ops, session_id=deep.pk)
    result = call_tool(ctx, "run_subagent", {"name": "writer", "task": "again"})
    assert result["success"] is False and result["code"] == "SUBAGENT_DEPTH_LIMIT"
    assert Session.objects.count() == 1


def test_an_unknown_subagent_is_refused_with_the_list_and_nothing_runs(ops, scripted_provider):
    write_subagent("ops", "writer", WRITER)
    result = call_tool(ToolContext(team=ops), "run_subagent", {"name": "poet", "task": "x"})
    assert result["success"] is False and result["code"] == "UNKNOWN_SUBAGENT"
    assert 'unknown subagent "poet" for team "ops" (available: writer)' in result["error"]
    assert not Session.objects.exists()


# --- the child session, through the real runner -------------------------------------------------


def delegation_script(child_reply: dict) -> list[dict]:
    return [
        {
            "when": {"team": "ops", "last": "user"},
            "reply": {
                "tool_calls": [
                    {
                        "name": "run_subagent",
                        "arguments": {"name": "writer", "task": "Write a haiku about disks."},
                    }
                ]
            },
        },
        {"when": {"team": "ops/writer", "last": "user"}, "reply": child_reply},
        {
            "when": {"team": "ops", "last": "tool", "tool": "run_subagent"},
            "reply": {"content": "Relayed."},
        },
    ]


def test_the_orchestrator_sees_only_the_subagents_final_answer(ops, scripted_provider):
    write_subagent("ops", "writer", WRITER)
    scripted_provider(
        delegation_script(
            {
                "content": "Disks spin; / bytes settle into sectors; / the log rotates.",
                "usage": {"prompt_tokens": 40, "completion_tokens": 12},
            }
        )
    )
    task = task_enqueue(team=ops, text="SECRET-PLAN: we need a poem for the wiki")
    assert run_task(task.pk) == "done"
    parent = Session.objects.get(kind="task")
    child = Session.objects.get(kind="subagent")
    # Linked: same task (its spend counts for the task), parent session and task recorded.
    assert child.task_id == task.pk and child.parent_task_id == task.pk
    assert child.parent_session_id == parent.pk and child.agent_name == "writer"
    assert child.stop_reason == "completed" and child.prompt_tokens == 40
    assert child.trace_id and child.trace_id == parent.trace_id
    # Isolated: the child saw its own task text, never the orchestrator's conversation.
    child_sent = sent_text(child)
    assert "Write a haiku about disks." in child_sent
    assert "SECRET-PLAN" not in child_sent
    assert "--- Subagent: writer ---" in child_sent
    # The parent got the final answer only, as the tool's result.
    call = ToolCall.objects.get(tool="run_subagent")
    assert call.session_id == parent.pk and call.success
    assert call.result["result"].startswith("Disks spin;")
    assert call.result["session_id"] == child.pk and call.result["subagent"] == "writer"
    task.refresh_from_db()
    assert task.result == "Relayed."
    assert set(Session.objects.filter(task=task).values_list("kind", flat=True)) == {
        "task",
        "subagent",
    }


def test_the_subagents_tool_calls_are_its_own_and_narrowed(ops, scripted_provider):
    write_subagent("ops", "writer", WRITER)
    scripted_provider(
        [
            *delegation_script(
                {"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf /"}}]}
            )[:1],
            {
                "when": {"team": "ops/writer", "last": "user"},
                "reply": {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
            },
            {"when": {"team": "ops/writer", "last": "tool"}, "reply": {"content": "No shell."}},
            {"when": {"team": "ops", "last": "tool"}, "reply": {"content": "ok"}},
        ]
    )
    task = task_enqueue(team=ops, text="go")
    assert run_task(task.pk) == "done"
    child = Session.objects.get(kind="subagent")
    bash = ToolCall.objects.get(tool="bash")
    assert bash.session_id == child.pk and not bash.success
    assert "bash" not in LlmExchange.objects.filter(session=child).first().tools
    assert "write_file" in LlmExchange.objects.filter(session=child).first().tools


def test_a_failed_subagent_is_a_failed_tool_call_naming_why(ops, scripted_provider):
    write_subagent(
        "ops", "writer", WRITER.replace("---\nYou", "provider_profile: nowhere\n---\nYou")
    )
    scripted_provider(delegation_script({"content": "never"}))
    task = task_enqueue(team=ops, text="go")
    assert run_task(task.pk) == "done"
    call = ToolCall.objects.get(tool="run_subagent")
    assert not call.success and call.result["code"] == "SUBAGENT_ERROR"
    assert 'subagent "writer" stopped (error)' in call.result["error"]
    assert "nowhere" in call.result["error"]
    child = Session.objects.get(kind="subagent")
    assert child.stop_reason == "error" and call.result["session_id"] == child.pk


def test_a_subagent_runs_on_its_own_provider_profile(ops, scripted_provider):
    write_subagent("ops", "writer", WRITER.replace("---\nYou", "provider_profile: fast\n---\nYou"))
    scripted_provider(delegation_script({"content": "default answered"}))
    scripted_provider([{"when": {}, "reply": {"content": "fast answered"}}], profile="fast")
    task = task_enqueue(team=ops, text="go")
    assert run_task(task.pk) == "done"
    child = Session.objects.get(kind="subagent")
    assert child.provider_profile == "fast" and child.final_text == "fast answered"
    assert Session.objects.get(kind="task").provider_profile == "default"


def test_a_delegation_replays_as_a_tree_without_divergence(ops, scripted_provider):
    from openhive.cli.replay import replay_options
    from openhive.engine.replay import replay_tree

    write_subagent("ops", "writer", WRITER)
    scripted_provider(delegation_script({"content": "A haiku."}))
    task = task_enqueue(team=ops, text="go")
    assert run_task(task.pk) == "done"
    parent = Session.objects.select_related("team").get(kind="task")
    report = replay_tree(parent, **replay_options())
    assert report.divergence is None and len(report.children) == 1
    assert report.children[0].divergence is None
    assert Session.objects.count() == 2  # the replay was rolled back


def test_the_childs_spend_counts_for_the_task_budget_it_serves(ops, scripted_provider):
    write_subagent("ops", "writer", WRITER)
    config = load_team_config("ops")
    # Room for the orchestrator's first request (its system prompt and tools are a few
    # thousand tokens), which alone spends most of the task's budget.
    config.budgets.task_tokens = 9000
    write_team_config(config)
    script = delegation_script({"content": "never asked"})
    script[0]["reply"]["usage"] = {"prompt_tokens": 8900, "completion_tokens": 50}
    scripted_provider(script)
    task = task_enqueue(team=ops, text="go")
    run_task(task.pk)
    child = Session.objects.get(kind="subagent")
    assert child.task_id == task.pk and child.stop_reason == "budget_exceeded"
    assert f"task #{task.pk}" in child.error
    call = ToolCall.objects.get(tool="run_subagent")
    assert call.result["code"] == "SUBAGENT_BUDGET_EXCEEDED"

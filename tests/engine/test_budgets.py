"""Budgets: checked before every model call with an estimate; a call that would pass a limit
is not made, the session stops with budget_exceeded and says which budget and how much."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
import yaml
from django.utils import timezone

from openhive.chat.models import OutboxMessage
from openhive.engine.budgets import TriggerWindow, forget_cached_files
from openhive.engine.models import LlmExchange, Session
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.agent import run_team_session
from teams.config import config_path, default_config, write_team_config
from teams.models import TeamMessage
from tests.factories import TeamFactory

# Every call "costs" 10,000 + 100 tokens and $0.01: far more than a prompt's estimate, so a
# limit of 2.5 calls lets exactly three calls through.
EXPENSIVE = [
    {
        "when": {},
        "reply": {
            "tool_calls": [{"name": "list_teams"}],
            "usage": {"prompt_tokens": 10_000, "completion_tokens": 100, "cost_usd": 0.01},
        },
    }
]
PER_CALL_TOKENS = 10_100


@pytest.fixture
def ops(db, main_team):
    team = TeamFactory(name="ops", parent=main_team, bootstrapped=True)
    write_team_config(default_config("ops", parent="main"))
    return team


def set_budgets(name: str = "ops", **budgets) -> None:
    config = default_config(name, parent=None if name == "main" else "main")
    write_team_config(
        config.model_copy(update={"budgets": config.budgets.model_copy(update=budgets)})
    )


def calls_made(outcome) -> int:
    return LlmExchange.objects.filter(session_id=outcome.session_id).count()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("budget", "limit"),
    # Three calls fit, whatever the size of the request (the estimate of the next call):
    # the fourth would pass the limit by its completion alone.
    [("task_tokens", PER_CALL_TOKENS * 3 + 50), ("task_usd", 0.0305)],
)
def test_a_task_budget_stops_before_the_call_that_would_pass_it(
    ops, scripted_provider, budget, limit
):
    scripted_provider(EXPENSIVE)
    set_budgets(**{budget: limit})
    task = task_enqueue(team=ops, text="work")
    outcome = run_team_session(ops, "work", task_id=task.pk, max_turns=20)
    assert outcome.stop_reason == "budget_exceeded" and outcome.budget == budget
    assert calls_made(outcome) == 3
    spent = "30,300 tokens" if budget == "task_tokens" else "$0.0300"
    assert f"[Budget exceeded: {budget}, the task budget of team ops (task #{task.pk})" in (
        outcome.content
    )
    assert f"{spent} spent" in outcome.content
    session = Session.objects.get(pk=outcome.session_id)
    assert session.stop_reason == "budget_exceeded" and session.turns == 3


@pytest.mark.django_db
def test_the_task_budget_counts_every_session_of_the_task(ops, scripted_provider):
    scripted_provider(EXPENSIVE)
    task = task_enqueue(team=ops, text="work")
    run_team_session(ops, "work", task_id=task.pk, max_turns=2)  # an earlier attempt: 2 calls
    set_budgets(task_tokens=int(PER_CALL_TOKENS * 2.5))
    outcome = run_team_session(ops, "work", task_id=task.pk, max_turns=20)
    assert outcome.stop_reason == "budget_exceeded" and calls_made(outcome) == 1


@pytest.mark.django_db
@pytest.mark.parametrize(("budget", "limit"), [("daily_tokens", 38_000), ("daily_usd", 0.035)])
def test_a_daily_budget_counts_the_teams_sessions_of_today_only(
    ops, scripted_provider, budget, limit
):
    scripted_provider(EXPENSIVE)
    with time_machine.travel(timezone.now() - timedelta(days=1)):
        run_team_session(ops, "yesterday", max_turns=5)  # 5 calls yesterday: not today's
    run_team_session(ops, "earlier today", max_turns=3)  # 3 calls today
    set_budgets(**{budget: limit})
    outcome = run_team_session(ops, "now", max_turns=20)
    assert outcome.stop_reason == "budget_exceeded" and outcome.budget == budget
    assert calls_made(outcome) == 1  # 30,300 + the estimate fits; 40,400 would not
    assert "the daily budget of team ops" in outcome.content


@pytest.mark.django_db
@pytest.mark.parametrize(("budget", "limit"), [("window_tokens", 38_000), ("window_usd", 0.035)])
def test_a_window_budget_counts_the_triggers_tasks_since_the_window_opened(
    ops, scripted_provider, budget, limit
):
    scripted_provider(EXPENSIVE)
    opened = timezone.now() - timedelta(minutes=30)

    def tick(text: str, created):
        with time_machine.travel(created):
            task = task_enqueue(team=ops, text=text, correlation_id=f"trigger:7:window:{text}")
        return task

    before = tick("before", opened - timedelta(minutes=5))
    run_team_session(ops, "before", task_id=before.pk, max_turns=5)  # not this window
    earlier = tick("earlier", opened + timedelta(minutes=1))
    run_team_session(ops, "earlier", task_id=earlier.pk, max_turns=3)
    set_budgets(**{budget: limit})
    now = tick("now", opened + timedelta(minutes=20))
    window = TriggerWindow(trigger_id=7, opened_at=opened)
    outcome = run_team_session(ops, "now", task_id=now.pk, max_turns=20, trigger_window=window)
    assert outcome.stop_reason == "budget_exceeded" and outcome.budget == budget
    assert "trigger-window budget of team ops (trigger #7" in outcome.content
    assert calls_made(outcome) == 1
    # Outside a trigger window the same team runs on.
    free = run_team_session(ops, "other", max_turns=2)
    assert free.stop_reason == "max_turns"


@pytest.mark.django_db
@pytest.mark.parametrize(("key", "limit"), [("daily_tokens", 35_000), ("daily_usd", 0.035)])
def test_the_org_daily_cap_counts_every_team(
    main_team, ops, scripted_provider, openhive_dirs, key, limit
):
    scripted_provider(EXPENSIVE)
    run_team_session(main_team, "main works", max_turns=3)
    (openhive_dirs / "data" / "config" / "budgets.yaml").write_text(
        yaml.safe_dump({"org": {key: limit}})
    )
    forget_cached_files()  # the file is looked at once a second
    outcome = run_team_session(ops, "ops works", max_turns=20)
    assert outcome.stop_reason == "budget_exceeded" and outcome.budget == f"org_{key.split('_')[1]}"
    assert "the organisation's daily cap" in outcome.content


@pytest.mark.django_db
def test_no_budget_means_no_limit(ops, scripted_provider):
    scripted_provider(EXPENSIVE)
    outcome = run_team_session(ops, "work", max_turns=6)
    assert outcome.stop_reason == "max_turns" and calls_made(outcome) == 6


@pytest.mark.django_db(transaction=True)
def test_a_task_stopped_by_a_budget_says_so_and_the_user_is_told(ops, scripted_provider):
    scripted_provider(EXPENSIVE)
    set_budgets(task_tokens=18_000)
    task = task_enqueue(team=ops, text="work", source_channel="ws:user:1")
    assert run_task(task.pk) == Task.Status.FAILED
    task.refresh_from_db()
    assert task.stop_reason == "budget_exceeded"
    assert "task_tokens" in task.result and "20,200 tokens spent of 18,000 tokens" in task.result
    [note] = OutboxMessage.objects.filter(task_id=task.pk)
    assert "Budget exceeded" in note.content
    assert not TeamMessage.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_parent_team_is_told_when_nobody_is_listening(ops, scripted_provider):
    scripted_provider(EXPENSIVE)
    set_budgets(task_tokens=15_000)
    task = task_enqueue(team=ops, text="work")
    run_task(task.pk)
    [message] = TeamMessage.objects.filter(recipient__name="main")
    assert message.kind == "escalation" and message.reason == "budget exceeded"
    assert f"Task #{task.pk} stopped on a budget" in message.content


@pytest.mark.django_db
def test_unknown_budget_keys_are_a_config_error(ops, scripted_provider):
    scripted_provider(EXPENSIVE)
    data = default_config("ops", parent="main").model_dump()
    data["budgets"] = {"weekly_tokens": 5}
    config_path("ops").write_text(yaml.safe_dump(data))
    outcome = run_team_session(ops, "work")
    assert outcome.stop_reason == "error" and "weekly_tokens" in outcome.error


# --- the cheap bound before the exact estimate ----------------------------------------------


def _guard(**limits):
    from openhive.engine.budgets import BudgetGuard, Budgets, BudgetScope

    scope = BudgetScope(team_id=1, team_name="ops", session_id=1, task_id=1, window=None)
    return BudgetGuard(Budgets(**limits), scope)


@pytest.mark.django_db
def test_far_from_every_limit_the_request_is_not_tokenised(ops):
    from decimal import Decimal

    from openhive.engine.budgets import Estimate

    counted = []

    def exact():
        counted.append(1)
        return Estimate(900, Decimal(0))

    _guard(task_tokens=10_000).check(exact, bound=lambda: Estimate(5_000, Decimal(0)))
    assert counted == []


@pytest.mark.django_db
def test_near_a_limit_the_exact_estimate_decides(ops):
    from decimal import Decimal

    from openhive.engine.budgets import BudgetExceeded, Estimate

    guard = _guard(task_tokens=1_000)
    # The bound would pass the limit, the exact count does not: the call is made.
    guard.check(lambda: Estimate(900, Decimal(0)), bound=lambda: Estimate(5_000, Decimal(0)))
    with pytest.raises(BudgetExceeded) as refused:
        guard.check(lambda: Estimate(1_100, Decimal(0)), bound=lambda: Estimate(5_000, Decimal(0)))
    assert refused.value.budget == "task_tokens"
    assert "1,100 tokens" in str(refused.value)


@pytest.mark.parametrize("model", ["scripted/x.yaml", "gpt-4o", "anthropic/claude-sonnet-4-5"])
def test_the_bound_is_never_below_the_token_count(model):
    import json

    from openhive.core.registry import all_tools
    from openhive.engine.providers import ProviderProfile
    from openhive.engine.tokens import TokenCounter

    schemas = [spec.function_schema() for spec in all_tools()]
    counter = TokenCounter(ProviderProfile(name="x", model=model), schemas)
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "rules " * 300}]},
        {"role": "user", "content": "héllo wörld 日本語 🙂 " * 40, "name": "ana"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"x": "ü" * 500})},
        {"role": "assistant", "content": ""},
    ]
    for upto in range(1, len(messages) + 1):
        part = messages[:upto]
        assert counter.bound(part, tools=schemas) >= counter.count(part, tools=schemas)

"""A secret handed to the main agent in chat is stored encrypted in the vault and appears in no
other row, file or log line: not in the audit, the LLM exchanges, sessions, chat messages, the
outbox or the tasks, even when the user, the model and the team all repeat it."""

from __future__ import annotations

import logging

import pytest
from django.utils import timezone

from openhive.chat.models import OutboxMessage
from openhive.chat.services import message_record, message_rescrub, topic_open
from openhive.core import paths
from openhive.engine.models import Session, ToolCall
from tasks.models import Task
from tasks.runner import run_task
from teams.agent import run_team_session
from teams.models import Team
from tests.leaks import TRICKY_SECRETS, every_database_value, every_file, found_in
from vault import crypto
from vault.models import VaultEntry

# run_task closes stale connections as a worker must, so these tests commit for real.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("vault_key")]

SECRETS = {"plain": "s3cr3t-value-123456", **TRICKY_SECRETS}
CHANNEL = "web:alice"


def script(SECRET: str) -> list[dict]:
    return [
        {
            "when": {"team": "main", "last": "user", "matches": "(?i)spawn .*ops"},
            "reply": {
                "content": f"Creating ops with the token {SECRET}.",
                "tool_calls": [
                    {
                        "name": "spawn_team",
                        "arguments": {
                            "name": "ops",
                            "description": "Operations",
                            "scope_accepts": ["deployments"],
                            "init_context": f"Deploy with the API token {SECRET} on Fridays.",
                            "credentials": [{"key": "API_TOKEN", "value": SECRET}],
                        },
                    }
                ],
            },
        },
        {
            "when": {"team": "main", "last": "tool", "tool": "spawn_team"},
            "reply": {
                "tool_calls": [
                    {
                        "name": "delegate_task",
                        "arguments": {"team": "ops", "task": f"Check the API with token {SECRET}"},
                    }
                ]
            },
        },
        {
            "when": {"team": "main", "last": "tool", "tool": "delegate_task"},
            "reply": {"content": f"Done. For the record, your token is {SECRET}."},
        },
        {"when": {"team": "ops"}, "reply": {"content": f"Ready. I will use {SECRET} carefully."}},
    ]


def chat_turn(main_team, content: str) -> str:
    """What the chat does with one inbound message (store, run the main agent, store reply)."""
    topic = topic_open(channel_id=CHANNEL, name="General", now=timezone.now())
    inbound = message_record(topic=topic, sender_id="alice", role="user", content=content)
    outcome = run_team_session(
        main_team,
        inbound.content,
        kind=Session.Kind.CHAT,
        topic_id=topic.pk,
        source_channel=CHANNEL,
        actor="user:alice",
    )
    message_rescrub(message=inbound)
    assert outcome.ok, outcome.error
    message_record(topic=topic, sender_id="main", role="assistant", content=outcome.content)
    return outcome.content


@pytest.mark.parametrize("SECRET", SECRETS.values(), ids=SECRETS.keys())
def test_a_secret_given_in_chat_appears_nowhere_but_the_vault(
    SECRET, main_team, scripted_provider, scrubbed_caplog
):
    scripted_provider(script(SECRET))
    reply = chat_turn(main_team, f"Please spawn a team for ops; the API token is {SECRET}")
    logging.getLogger("openhive.test").warning("after the spawn the token is %s", SECRET)
    logging.getLogger("openhive.test").info(f"inline formatting of {SECRET}")

    # The team exists and its work ran, so every path had the chance to leak.
    ops = Team.objects.get(name="ops")
    for task in Task.objects.filter(team=ops).order_by("priority", "id"):
        run_task(task.pk)
    assert Team.objects.get(pk=ops.pk).bootstrapped
    assert Task.objects.filter(team=ops, status="done").count() == 2
    assert "[REDACTED]" in reply
    assert OutboxMessage.objects.count() == 2
    assert ToolCall.objects.filter(success=True).count() == 2

    # Nowhere in the database but the vault, in no written form.
    rows = every_database_value()
    leaks = {name: found_in(text, SECRET) for name, text in rows.items()}
    assert {name: forms for name, forms in leaks.items() if forms} == {}
    assert "[REDACTED]" in rows["engine.LlmExchange"] and "[REDACTED]" in rows["chat.Message"]

    # The vault holds ciphertext that decrypts to the secret.
    entry = VaultEntry.objects.get(team=ops, key="API_TOKEN")
    raw = VaultEntry.objects.filter(pk=entry.pk).values_list("value", flat=True).get()
    assert found_in(raw, SECRET) == [] and crypto.decrypt(raw) == SECRET

    # No file in any workspace.
    files = every_file(paths.teams_dir())
    assert (
        files
        and {name: found_in(t, SECRET) for name, t in files.items() if found_in(t, SECRET)} == {}
    )

    # No captured log line.
    records = scrubbed_caplog.records
    assert any(r.getMessage() == "after the spawn the token is [REDACTED]" for r in records)
    assert found_in(scrubbed_caplog.text, SECRET) == []
    for record in records:
        assert found_in(record.getMessage() + (record.exc_text or ""), SECRET) == []

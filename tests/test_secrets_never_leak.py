"""A secret handed to the main agent in chat is stored encrypted in the vault and appears in no
other row, file or log line: not in the audit, the LLM exchanges, sessions, chat messages, the
outbox or the tasks, even when the user, the model and the team all repeat it."""

from __future__ import annotations

import logging

import pytest
from django.core import serializers

from openhive import paths
from openhive.chat.models import Message, OutboxMessage, Topic
from openhive.chat.services import message_record, message_rescrub, topic_default
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.engine.session import SessionRequest, run_session
from tasks.models import Task
from tasks.runner import run_task
from teams.models import Team
from vault import crypto
from vault.models import VaultEntry

# run_task closes stale connections as a worker must, so these tests commit for real.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("vault_key")]

SECRET = "s3cr3t-value-123456"
CHANNEL = "web:alice"

SCRIPT = [
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
    topic = topic_default(channel_id=CHANNEL)
    inbound = message_record(topic=topic, sender_id="alice", role="user", content=content)
    outcome = run_session(
        SessionRequest(
            team=main_team,
            content=inbound.content,
            kind=Session.Kind.CHAT,
            topic=topic,
            source_channel=CHANNEL,
            actor="user:alice",
        )
    )
    message_rescrub(message_id=inbound.pk)
    assert outcome.ok, outcome.error
    message_record(topic=topic, sender_id="main", role="assistant", content=outcome.content)
    return outcome.content


def every_row_as_text() -> dict[str, str]:
    models = [ToolCall, LlmExchange, Session, Message, OutboxMessage, Task, Topic, Team]
    return {m.__name__: serializers.serialize("json", m.objects.all()) for m in models}


def test_a_secret_given_in_chat_appears_nowhere_but_the_vault(
    main_team, scripted_provider, scrubbed_caplog
):
    scripted_provider(SCRIPT)
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

    # Nowhere in the database but the vault.
    rows = every_row_as_text()
    leaks = [name for name, text in rows.items() if SECRET in text]
    assert leaks == []
    assert "[REDACTED]" in rows["LlmExchange"] and "[REDACTED]" in rows["Message"]

    # The vault holds ciphertext that decrypts to the secret.
    entry = VaultEntry.objects.get(team=ops, key="API_TOKEN")
    raw = VaultEntry.objects.filter(pk=entry.pk).values_list("value", flat=True).get()
    assert SECRET not in raw and crypto.decrypt(raw) == SECRET

    # No file in any workspace.
    for path in paths.teams_dir().rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="ignore"), path

    # No captured log line.
    records = scrubbed_caplog.records
    assert any(r.getMessage() == "after the spawn the token is [REDACTED]" for r in records)
    assert SECRET not in scrubbed_caplog.text
    for record in records:
        assert SECRET not in record.getMessage()
        assert SECRET not in (record.exc_text or "")

"""A team reads its secret with vault_get and uses it: in tool calls, in its state, in its
memory and in its reply. Afterwards the value is nowhere but in the vault's ciphertext: no
database column of any model, no log line, no chat message, no API response."""

from __future__ import annotations

import logging

import pytest
from django.apps import apps
from django.core import serializers
from django.db import connection

from openhive.chat.models import Message, OutboxMessage
from openhive.chat.services import topic_default
from openhive.engine.models import ToolCall
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from teams.services import team_spawn
from tests.api.conftest import api_client, api_token, fast_password_hashing  # noqa: F401
from vault import crypto
from vault.models import VaultEntry

# run_task closes stale connections as a worker must, so this test commits for real.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("vault_key")]

SECRET = "ghp-Zx81mQ27vLpE5nWc"

SCRIPT = [
    {
        "when": {"team": "ops", "last": "user"},
        "reply": {"tool_calls": [{"name": "vault_get", "arguments": {"key": "API_TOKEN"}}]},
    },
    {
        "when": {"team": "ops", "last": "tool", "tool": "vault_get"},
        "reply": {
            "content": f"Got the token {SECRET}, using it now.",
            "tool_calls": [
                {"name": "vault_set", "arguments": {"key": "last_auth", "value": f"{SECRET}"}},
                {
                    "name": "memory_save",
                    "arguments": {
                        "key": "api-access",
                        "content": f"The API accepts the token {SECRET} in the header.",
                        "type": "lesson",
                    },
                },
            ],
        },
    },
    {
        "when": {"team": "ops", "last": "tool", "tool": "memory_save"},
        "reply": {
            "tool_calls": [
                {"name": "memory_search", "arguments": {"query": f"token {SECRET}"}},
            ]
        },
    },
    {
        "when": {"team": "ops", "last": "tool", "tool": "memory_search"},
        "reply": {"content": f"Checked the API with {SECRET}: it answers 200."},
    },
    {"when": {}, "reply": {"content": "ok"}},
]


def every_database_value() -> dict[str, str]:
    """Every row of every model, serialised, plus the SQLite FTS index's own tables."""
    dump = {
        model._meta.label: serializers.serialize("json", model._default_manager.all())
        for model in apps.get_models()
    }
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT content FROM memory_chunk_fts")
            dump["memory_chunk_fts"] = " ".join(row[0] for row in cursor.fetchall())
    return dump


def test_a_secret_read_and_used_by_a_team_leaks_nowhere(
    main_team,
    scripted_provider,
    scrubbed_caplog,
    api_client,  # noqa: F811
):
    scripted_provider(SCRIPT)
    ops = team_spawn(
        parent=main_team,
        name="ops",
        description="Operations",
        credentials={"API_TOKEN": SECRET},
        source_channel="web:alice",
    ).team
    topic = topic_default(channel_id="web:alice")
    task_enqueue(
        team=ops,
        text="Check the API is up.",
        source_channel="web:alice",
        topic_id=topic.pk,
        created_by="main",
    )
    for task in Task.objects.filter(team=ops).order_by("priority", "id"):
        run_task(task.pk)
    logging.getLogger("openhive.test").info("the team used %s", SECRET)

    # The scenario really ran: the team read, stored, remembered and reported.
    assert Task.objects.filter(team=ops, status="done").count() == 2
    used = set(ToolCall.objects.filter(team=ops, success=True).values_list("tool", flat=True))
    assert used >= {"vault_get", "vault_set", "memory_save", "memory_search"}
    assert VaultEntry.objects.get(team=ops, key="last_auth").value == "[REDACTED]"
    assert ops.memories.get(key="api-access").content.endswith("[REDACTED] in the header.")
    result = Task.objects.filter(team=ops, type=Task.Type.DELEGATE).get().result
    assert result == "Checked the API with [REDACTED]: it answers 200."
    assert OutboxMessage.objects.filter(content__contains="it answers 200").exists()

    # No database column of any model holds the value (the vault keeps only ciphertext).
    leaks = [label for label, text in every_database_value().items() if SECRET in text]
    assert leaks == []
    raw = VaultEntry.objects.get(team=ops, key="API_TOKEN").value
    assert crypto.decrypt(raw) == SECRET

    # No log line.
    assert scrubbed_caplog.records
    assert SECRET not in scrubbed_caplog.text
    for record in scrubbed_caplog.records:
        assert SECRET not in record.getMessage() and SECRET not in (record.exc_text or "")

    # No chat message.
    chat = [m.content for m in Message.objects.all()] + [
        o.content for o in OutboxMessage.objects.all()
    ]
    assert chat and all(SECRET not in text for text in chat)

    # No API response.
    task_ids = Task.objects.filter(team=ops).values_list("pk", flat=True)
    paths = [
        "/api/v1/health",
        "/api/v1/teams",
        "/api/v1/teams/tree",
        "/api/v1/teams/ops",
        "/api/v1/tasks",
        *[f"/api/v1/tasks/{pk}" for pk in task_ids],
        "/api/v1/memories?team=ops&status=all",
        "/api/v1/memories/search?team=ops&q=API+token+header",
        "/api/v1/vault/ops",
    ]
    for path in paths:
        response = api_client.get(path)
        assert response.status_code == 200, path
        assert SECRET not in response.content.decode(), path

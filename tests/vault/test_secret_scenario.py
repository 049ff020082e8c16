"""A team reads its secret with vault_get and uses it: in tool calls, in its state, in its
memory and in its reply. Afterwards the value is nowhere but in the vault's ciphertext: no
database column of any model, no file, no log line, no chat message, no API response, in none
of the forms it takes once escaped (JSON, repr, URL), whatever characters the secret holds."""

from __future__ import annotations

import logging

import pytest
from django.utils import timezone

from openhive.chat.models import Message, OutboxMessage
from openhive.chat.services import topic_open
from openhive.core import paths as openhive_paths
from openhive.engine.models import LlmExchange, Session, ToolCall
from openhive.org.services import team_spawn
from tasks.models import Task
from tasks.runner import run_task
from tasks.services import task_enqueue
from tests.api.conftest import api_client, api_token, fast_password_hashing  # noqa: F401
from tests.leaks import (
    TRICKY_SECRETS,
    every_database_value,
    every_file,
    every_get_response,
    found_in,
)
from vault import crypto
from vault.models import VaultEntry

# run_task closes stale connections as a worker must, so this test commits for real.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("vault_key")]

SECRETS = {"plain": "ghp-Zx81mQ27vLpE5nWc", **TRICKY_SECRETS}


def script(secret: str) -> list[dict]:
    return [
        {
            "when": {"team": "ops", "last": "user"},
            "reply": {"tool_calls": [{"name": "vault_get", "arguments": {"key": "API_TOKEN"}}]},
        },
        {
            "when": {"team": "ops", "last": "tool", "tool": "vault_get"},
            "reply": {
                "content": f"Got the token {secret}, using it now.",
                "tool_calls": [
                    {"name": "vault_set", "arguments": {"key": "last_auth", "value": secret}},
                    {
                        "name": "memory_save",
                        "arguments": {
                            "key": "api-access",
                            "content": f"The API accepts the token {secret} in the header.",
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
                    {"name": "memory_search", "arguments": {"query": f"token {secret}"}},
                ]
            },
        },
        {
            "when": {"team": "ops", "last": "tool", "tool": "memory_search"},
            "reply": {"content": f"Checked the API with {secret}: it answers 200."},
        },
        {"when": {}, "reply": {"content": "ok"}},
    ]


@pytest.mark.parametrize("SECRET", SECRETS.values(), ids=SECRETS.keys())
def test_a_secret_read_and_used_by_a_team_leaks_nowhere(
    SECRET,
    main_team,
    scripted_provider,
    scrubbed_caplog,
    api_client,  # noqa: F811
):
    scripted_provider(script(SECRET))
    ops = team_spawn(
        parent=main_team,
        name="ops",
        description="Operations",
        credentials={"API_TOKEN": SECRET},
        source_channel="web:alice",
    ).team
    topic = topic_open(channel_id="web:alice", name="General", now=timezone.now())
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

    # The model's own view of the tool result was JSON (escaped quotes, backslashes, \uXXXX).
    assert LlmExchange.objects.filter(session__team=ops).count() >= 4

    # No database column of any model holds the value in any form (the vault keeps only
    # ciphertext).
    leaks = {label: found_in(text, SECRET) for label, text in every_database_value().items()}
    assert {label: forms for label, forms in leaks.items() if forms} == {}
    raw = VaultEntry.objects.get(team=ops, key="API_TOKEN").value
    assert crypto.decrypt(raw) == SECRET

    # No file the system wrote (the test's own script, which quotes the secret, aside).
    files = every_file(openhive_paths.data_dir(), skip=[openhive_paths.scripts_dir()])
    files |= every_file(openhive_paths.run_dir())
    assert files
    assert {
        name: found_in(text, SECRET) for name, text in files.items() if found_in(text, SECRET)
    } == {}

    # No log line.
    assert scrubbed_caplog.records
    assert found_in(scrubbed_caplog.text, SECRET) == []
    for record in scrubbed_caplog.records:
        assert found_in(record.getMessage() + (record.exc_text or ""), SECRET) == []

    # No chat message.
    chat = [m.content for m in Message.objects.all()] + [
        o.content for o in OutboxMessage.objects.all()
    ]
    assert chat and all(found_in(text, SECRET) == [] for text in chat)

    # No answer of any GET operation of the API, for every row this scenario made.
    answers = every_get_response(
        api_client,
        {
            "name": ["ops", "main"],
            "team": ["ops"],
            "task_id": list(Task.objects.values_list("pk", flat=True)),
            "session_id": list(Session.objects.values_list("pk", flat=True)),
            "topic_id": list(Message.objects.values_list("topic_id", flat=True).distinct()),
            "memory_id": list(ops.memories.values_list("pk", flat=True)),
            "q": ["API token header", SECRET],
        },
    )
    assert len(answers) >= 20
    ok = [url for url, (status, _) in answers.items() if status == 200]
    assert any(url.startswith("/api/v1/sessions/") for url in ok)
    assert {
        url: found_in(body, SECRET) for url, (_, body) in answers.items() if found_in(body, SECRET)
    } == {}

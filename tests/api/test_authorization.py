"""Who may call what: every operation of the OpenAPI schema (and the docs), walked with a staff
token, a staff session, a non-staff user's token, tokens with an explicit scope, and no
identity at all. A token carries its user's rights: operator operations need staff (or the
operator scope); a chat user's token chats and reads only its own topics."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.test import Client

from openhive.api import api
from openhive.chat.selectors import user_channel_id
from tests.api.factories import (
    MemoryFactory,
    MessageFactory,
    SessionFactory,
    TopicFactory,
    TriggerConfigFactory,
    UserFactory,
    VaultEntryFactory,
)
from tests.factories import TaskFactory, TeamFactory
from trust.models import ApiToken
from trust.services import api_token_create

pytestmark = pytest.mark.django_db

# Operations every identity may call (each answers with the caller's own data only).
MEMBER_OPERATIONS = {("get", "/api/v1/topics"), ("get", "/api/v1/topics/{topic_id}/messages")}
OPEN_OPERATIONS = {("get", "/api/v1/health")}
DOCS = ["/api/v1/docs", "/api/v1/openapi.json"]

# Valid bodies, so that a refusal is about rights and not about the input.
BODIES = {
    ("post", "/api/v1/teams"): {"name": "newteam", "scope_accepts": ["x"]},
    ("patch", "/api/v1/teams/{name}/scope"): {"add": ["more"]},
    ("post", "/api/v1/tasks"): {"team": "ops", "text": "check the disks"},
    ("post", "/api/v1/triggers"): {
        "team": "ops",
        "name": "nightly",
        "type": "schedule",
        "config": {"cron": "0 2 * * *"},
        "task": "report",
    },
    ("patch", "/api/v1/triggers/{team}/{name}"): {"task": "changed"},
    ("put", "/api/v1/vault/{team}/{key}"): {"value": "a-new-secret-value"},
    ("post", "/api/v1/trust"): {"channel_type": "ws", "sender_id": "mallory"},
    ("post", "/api/v1/trust/revoke"): {"channel_type": "ws", "sender_id": "bob"},
    ("post", "/api/v1/tasks/{task_id}/answer"): {"answer": "yes"},
    ("post", "/api/v1/tasks/{task_id}/approval"): {"decision": "approve"},
}


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(main_team) -> dict:
    """One of everything an operation can name, all of it someone else's."""
    ops = TeamFactory(name="ops", parent=main_team)
    task = TaskFactory(team=ops, status="failed")
    session = SessionFactory(team=ops, task=task)
    trigger = TriggerConfigFactory(team=ops, name="daily")
    memory = MemoryFactory(team=ops)
    VaultEntryFactory(team=ops, key="cursor")
    topic = TopicFactory(channel_id="ws:user:999999")
    MessageFactory(topic=topic, content="a private conversation")
    from trust.services import sender_trust_set

    sender_trust_set(channel_type="ws", sender_id="bob", granted_by="t")
    from django.utils import timezone

    from evolution.models import CycleChange

    # A proposed identity change: confirm applies it, reject then conflicts, revert undoes it.
    change = CycleChange.objects.create(
        team=ops,
        subagent="scout",
        kind="reflection",
        target_type="file",
        target="subagents/scout.md",
        before=None,
        after="---\ndescription: x\n---\n",
        identity=True,
        status="proposed",
        created_at=timezone.now(),
    )
    return {
        "change_id": change.pk,
        "name": "ops",
        "team": "ops",
        "task_id": task.pk,
        "session_id": session.pk,
        "topic_id": topic.pk,
        "memory_id": memory.pk,
        "key": "cursor",
        "trigger": trigger.name,
        "q": "anything",
    }


def operations() -> list[tuple[str, str, dict]]:
    found = []
    for path, methods in api.get_openapi_schema()["paths"].items():
        for method, operation in methods.items():
            found.append((method, path, operation))
    # Removals last (the team's own removal at the very end), so each call finds its target.
    return sorted(found, key=lambda op: (op[0] == "delete", op[1] == "/api/v1/teams/{name}"))


def request(client: Client, method: str, path: str, operation: dict, world: dict):
    url, query = path, {}
    for param in operation.get("parameters", []):
        name = param["name"]
        value = world["trigger"] if (name == "name" and "/triggers/" in path) else world.get(name)
        if param["in"] == "path":
            url = url.replace("{" + name + "}", str(value))
        elif param.get("required"):
            query[name] = value
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    body = BODIES.get((method, path))
    if method == "get":
        return client.get(url)
    return getattr(client, method)(url, body or {}, content_type="application/json")


def snapshot() -> dict[str, int]:
    return {m._meta.label: m._default_manager.count() for m in apps.get_models()} | {
        "vault values": hash(
            tuple(
                apps.get_model("vault", "VaultEntry").objects.values_list("key", "value", "version")
            )
        ),
        "scopes": hash(tuple(apps.get_model("teams", "ScopeKeyword").objects.values_list())),
        "trigger states": hash(
            tuple(apps.get_model("triggers", "TriggerConfig").objects.values_list("state", "task"))
        ),
        "task states": hash(tuple(apps.get_model("tasks", "Task").objects.values_list("status"))),
    }


def token_client(username: str, *, staff: bool, scope: str = ApiToken.Scope.USER) -> Client:
    UserFactory(username=username, is_staff=staff)
    _, token = api_token_create(username=username, scope=scope)
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def test_the_walk_covers_every_operation_of_the_schema():
    assert len(operations()) >= 37
    assert {(m, p) for m, p, _ in operations()} >= MEMBER_OPERATIONS | OPEN_OPERATIONS


@pytest.mark.parametrize(
    "who",
    ["no identity", "non-staff token", "staff token with the chat scope", "non-staff session"],
)
def test_without_operator_rights_no_operator_operation_runs(world, who):
    client = {
        "no identity": lambda: Client(),
        "non-staff token": lambda: token_client("carol", staff=False),
        "staff token with the chat scope": lambda: token_client(
            "chatty-admin", staff=True, scope=ApiToken.Scope.CHAT
        ),
        "non-staff session": lambda: _session_client(staff=False),
    }[who]()
    has_identity = who in ("non-staff token", "staff token with the chat scope")
    before = snapshot()
    refused = {}
    for method, path, operation in operations():
        if (method, path) in OPEN_OPERATIONS:
            continue
        response = request(client, method, path, operation, world)
        refused[(method, path)] = response.status_code
        if (method, path) in MEMBER_OPERATIONS and has_identity:
            # Allowed, but the only topic there is belongs to someone else.
            assert response.status_code in (200, 404), (method, path, response.content)
            assert "private conversation" not in response.content.decode()
            assert "999999" not in response.content.decode()
        else:
            expected = 403 if has_identity else 401
            assert response.status_code == expected, (method, path, response.content)
            assert "detail" in response.json(), (method, path)
            if expected == 403:
                assert response.json()["code"] == "operator_only"
    assert len(refused) == len(operations()) - len(OPEN_OPERATIONS)
    # Nothing was created, changed or removed by any of those calls.
    assert snapshot() == before


def _session_client(*, staff: bool) -> Client:
    client = Client()
    client.force_login(UserFactory(username=f"session-{staff}", is_staff=staff))
    return client


@pytest.mark.parametrize(
    "who", ["staff token", "staff session", "non-staff token with the operator scope"]
)
def test_operators_reach_every_operation(world, who):
    client = {
        "staff token": lambda: token_client("boss", staff=True),
        "staff session": lambda: _session_client(staff=True),
        "non-staff token with the operator scope": lambda: token_client(
            "deputy", staff=False, scope=ApiToken.Scope.OPERATOR
        ),
    }[who]()
    answers = {}
    for method, path, operation in operations():
        response = request(client, method, path, operation, world)
        answers[(method, path)] = response.status_code
        assert response.status_code not in (401, 403), (method, path, response.content)
    # With the valid bodies and ids above, almost every operation simply succeeds.
    succeeded = [op for op, status in answers.items() if status < 300]
    # The rest meet the state of the one shared task (failed: nothing to cancel, no question
    # waiting) or change (confirmed first, so it can no longer be rejected): conflicts only.
    conflicts = {op: status for op, status in answers.items() if status >= 300}
    assert set(conflicts.values()) <= {409}, conflicts
    assert len(succeeded) >= len(answers) - 4, answers
    topics = client.get("/api/v1/topics").json()
    assert [t["channel_id"] for t in topics] == ["ws:user:999999"]


def test_docs_need_an_identity_of_any_kind(world):
    carol = token_client("carol", staff=False)
    for path in DOCS:
        assert Client().get(path).status_code == 401
        assert carol.get(path).status_code == 200


def test_a_chat_users_token_sees_its_own_topic(world):
    user = UserFactory(username="dave")
    _, token = api_token_create(username="dave")
    mine = TopicFactory(channel_id=user_channel_id(user.pk), name="Dave's")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert [t["id"] for t in client.get("/api/v1/topics").json()] == [mine.pk]
    assert client.get(f"/api/v1/topics/{mine.pk}/messages").status_code == 200

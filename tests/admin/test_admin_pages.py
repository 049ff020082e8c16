"""Every model has a working back-office page, and the pages keep the system's invariants."""

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib import admin
from django.db.models import Model
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from memory.models import MemoryChunk
from memory.services import memory_save
from openhive.engine.models import EngineLease, WorkerBeat
from tests.api.factories import (
    LlmExchangeFactory,
    MemoryFactory,
    MessageFactory,
    OutboxMessageFactory,
    ScopeKeywordFactory,
    SenderTrustFactory,
    SessionFactory,
    ToolCallFactory,
    TopicFactory,
    TriggerConfigFactory,
    TrustAuditLogFactory,
    UserFactory,
    VaultEntryFactory,
)
from tests.factories import TaskFactory, TeamFactory
from trust.models import ApiToken
from trust.services import api_token_create

pytestmark = pytest.mark.django_db

OUR_APPS = ("teams", "tasks", "triggers", "memory", "vault", "trust", "engine", "chat", "tools")
OUR_APPS += ("evolution",)


def _api_token() -> ApiToken:
    UserFactory(username="operator")
    return api_token_create(username="operator")[0]


def _memory_chunk() -> MemoryChunk:
    return memory_save(team=TeamFactory(), key="k", content="remember this").memory.chunks.get()


def _engine_lease() -> EngineLease:
    now = timezone.now()
    return EngineLease.objects.create(
        name="leader", holder="host:1", acquired_at=now, expires_at=now + timedelta(seconds=30)
    )


def _worker_beat() -> WorkerBeat:
    now = timezone.now()
    return WorkerBeat.objects.create(name="host:1", threads=2, started_at=now, seen_at=now)


def _trigger_event() -> Model:
    from triggers.models import TriggerEvent

    return TriggerEvent.objects.create(
        trigger=TriggerConfigFactory(), key="schedule:x", outcome="fired", created_at=timezone.now()
    )


def _team_message() -> Model:
    from teams.models import TeamMessage

    return TeamMessage.objects.create(
        sender=TeamFactory(), recipient=TeamFactory(), content="hello"
    )


def _org_op_lock() -> Model:
    from tasks.models import OrgOpLock

    now = timezone.now()
    return OrgOpLock.objects.create(
        team=TeamFactory(), holder="h", acquired_at=now, expires_at=now + timedelta(seconds=30)
    )


def _rate_limit_bucket() -> Model:
    from openhive.tools.models import RateLimitBucket

    return RateLimitBucket.objects.create(team=TeamFactory(), key="api", tokens=1.5, refilled_at=0)


def _mcp_server_status() -> Model:
    from openhive.tools.services import mcpstatus_record

    return mcpstatus_record(
        team_id=TeamFactory().pk,
        server="git",
        transport="stdio",
        state="failed",
        fingerprint="f" * 64,
        tools=[{"name": "git_log", "description": "Log", "input_schema": {}}],
        error="command not found",
    )


def _reach_call() -> Model:
    from openhive.tools.models import ReachCall

    row = ToolCallFactory(tool="web_fetch", arguments={"url": "https://example.com/"})
    return ReachCall.objects.get(pk=row.pk)


def _plugin() -> Model:
    from openhive.tools.models import Plugin

    return Plugin.objects.create(
        team=TeamFactory(),
        tool_name="add",
        source_path="plugins/add.py",
        source_hash="0" * 64,
        description="Add two numbers",
        parameters={"type": "object", "properties": {}},
    )


def _task_todo() -> Model:
    from tasks.models import TaskTodo

    return TaskTodo.objects.create(task=TaskFactory(), position=1, text="Check the disk")


def _user_question() -> Model:
    from tasks.models import UserQuestion

    task = TaskFactory(status="waiting_for_user")
    return UserQuestion.objects.create(
        task=task, team=task.team, kind="question", text="Which disk?", options=["sda", "sdb"]
    )


def _cycle_run() -> Model:
    from evolution.models import CycleRun

    return CycleRun.objects.create(
        team=TeamFactory(),
        subagent="scout",
        kind="learning",
        outcome="skipped",
        reason="no scope keywords",
        created_at=timezone.now(),
    )


def _learning() -> Model:
    from evolution.models import Learning

    now = timezone.now()
    return Learning.objects.create(
        team=TeamFactory(),
        subagent="scout",
        topic="tls",
        insight="Renew early.",
        confidence="medium",
        sources=["https://x.example"],
        created_at=now,
        updated_at=now,
    )


def _cycle_change() -> Model:
    from evolution.models import CycleChange

    return CycleChange.objects.create(
        team=TeamFactory(),
        subagent="scout",
        kind="reflection",
        target_type="file",
        target="skills/x/SKILL.md",
        before="old",
        after="new",
        reason="evidence",
        evidence={"task_ids": [1]},
        status="applied",
        created_at=timezone.now(),
    )


def _history_vector() -> Model:
    import numpy as np

    from memory.models import HistoryVector

    return HistoryVector.objects.create(
        team=TeamFactory(),
        kind="session",
        object_id=1,
        content_hash="h",
        embedding=np.zeros(384, dtype=np.float32),
        embedding_model="m",
    )


MAKERS: dict[str, Callable[[], Model]] = {
    "memory.historyvector": _history_vector,
    "evolution.cyclerun": _cycle_run,
    "evolution.learning": _learning,
    "evolution.cyclechange": _cycle_change,
    "tools.mcpserverstatus": _mcp_server_status,
    "tools.ratelimitbucket": _rate_limit_bucket,
    "tools.reachcall": _reach_call,
    "tools.plugin": _plugin,
    "teams.teammessage": _team_message,
    "tasks.orgoplock": _org_op_lock,
    "teams.team": TeamFactory,
    "teams.scopekeyword": ScopeKeywordFactory,
    "tasks.task": TaskFactory,
    "tasks.tasktodo": _task_todo,
    "tasks.userquestion": _user_question,
    "triggers.triggerconfig": TriggerConfigFactory,
    "triggers.triggerevent": _trigger_event,
    "memory.memory": MemoryFactory,
    "memory.memorychunk": _memory_chunk,
    "vault.vaultentry": VaultEntryFactory,
    "trust.apitoken": _api_token,
    "trust.sendertrust": SenderTrustFactory,
    "trust.trustauditlog": TrustAuditLogFactory,
    "engine.session": SessionFactory,
    "engine.llmexchange": LlmExchangeFactory,
    "engine.toolcall": ToolCallFactory,
    "engine.enginelease": _engine_lease,
    "engine.workerbeat": _worker_beat,
    "chat.topic": TopicFactory,
    "chat.message": MessageFactory,
    "chat.outboxmessage": OutboxMessageFactory,
}


def _admin_url(obj: Model, view: str) -> str:
    meta = obj._meta
    args = () if view in ("changelist", "add") else (obj.pk,)
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def test_every_model_of_our_apps_is_registered():
    admin.autodiscover()  # as the URLconf does (openhive/admin_app.py)
    models = [m for label in OUR_APPS for m in apps.get_app_config(label).get_models()]
    missing = [m._meta.label for m in models if not admin.site.is_registered(m)]
    assert missing == []
    assert {m._meta.label_lower for m in models} == set(MAKERS)


@pytest.mark.parametrize("label", sorted(MAKERS))
def test_changelist_search_and_change_pages_render(admin_client, admin_user, main_team, label):
    obj = MAKERS[label]()
    assert admin_client.get(_admin_url(obj, "changelist")).status_code == 200
    assert admin_client.get(_admin_url(obj, "changelist") + "?q=x").status_code == 200
    assert admin_client.get(_admin_url(obj, "change")).status_code == 200
    assert admin_client.get(_admin_url(obj, "history")).status_code == 200
    model_admin = admin.site._registry[type(obj)]
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    if model_admin.has_add_permission(request):
        assert admin_client.get(_admin_url(obj, "add")).status_code == 200


def test_index_and_engine_app_page_link_the_provider_profiles(admin_client):
    for url in ("/admin/", "/admin/engine/"):
        response = admin_client.get(url)
        assert response.status_code == 200
        assert 'href="/admin/providers/"' in response.content.decode()


def test_provider_page_lists_profiles_without_keys(admin_client, openhive_dirs):
    (openhive_dirs / "data" / "config" / "providers.yaml").write_text(
        "profiles:\n"
        "  default: {model: anthropic/claude-sonnet-4-5, api_key: sk-ant-supersecretvalue123}\n"
        "  local: {model: ollama/llama3.1, api_base: 'http://127.0.0.1:11434'}\n"
    )
    response = admin_client.get("/admin/providers/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "anthropic/claude-sonnet-4-5" in html and "ollama/llama3.1" in html
    assert "http://127.0.0.1:11434" in html
    assert "not set" in html
    assert "supersecretvalue" not in html


def test_provider_page_explains_an_invalid_file(admin_client, openhive_dirs):
    (openhive_dirs / "data" / "config" / "providers.yaml").write_text("profiles: [\n")
    response = admin_client.get("/admin/providers/")
    assert response.status_code == 200
    assert "is invalid" in response.content.decode()


def test_provider_page_names_a_broken_profile_beside_the_working_ones(admin_client, openhive_dirs):
    (openhive_dirs / "data" / "config" / "providers.yaml").write_text(
        "profiles: {x: {}, ok: {model: openai/ok}}"
    )
    page = admin_client.get("/admin/providers/").content.decode()
    assert "providers.yaml: profile &quot;x&quot;: missing &quot;model&quot;" in page
    assert "openai/ok" in page


def test_provider_page_is_for_staff_only(client):
    client.force_login(UserFactory(is_staff=False))
    response = client.get("/admin/providers/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_team_changelist_shows_keywords_and_pending_count(admin_client, main_team):
    ops = TeamFactory(name="ops", parent=main_team)
    ScopeKeywordFactory(team=ops, keyword="deploy")
    TaskFactory.create_batch(3, team=ops)
    html = admin_client.get("/admin/teams/team/").content.decode()
    assert "deploy" in html
    assert '<td class="field-pending_tasks">3</td>' in html


def test_team_keyword_inline_stores_lowercase(admin_client, main_team):
    url = reverse("admin:teams_team_change", args=(main_team.pk,))
    response = admin_client.post(
        url,
        {
            "description": "Main orchestrator",
            "scope_keywords-TOTAL_FORMS": "1",
            "scope_keywords-INITIAL_FORMS": "0",
            "scope_keywords-0-keyword": "  Deploy ",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(main_team.scope_keywords.values_list("keyword", flat=True)) == ["deploy"]


def test_task_change_page_hides_secrets_and_lease_fields_are_read_only(admin_client, main_team):
    from vault.services import vault_store_secret

    vault_store_secret(team=main_team, key="TOKEN", value="hunter2-hunter2", updated_by="t")
    task = TaskFactory(team=main_team, text="use hunter2-hunter2", result="used hunter2-hunter2")
    response = admin_client.get(reverse("admin:tasks_task_change", args=(task.pk,)))
    html = response.content.decode()
    assert "hunter2-hunter2" not in html
    assert 'name="lease_owner"' not in html and 'name="status"' not in html
    assert 'name="priority"' in html


def test_task_cancel_action_cancels_pending_and_reports_finished(admin_client, main_team):
    pending = TaskFactory(team=main_team)
    done = TaskFactory(team=main_team, status="done")
    response = admin_client.post(
        "/admin/tasks/task/",
        {"action": "cancel_tasks", "_selected_action": [pending.pk, done.pk]},
        follow=True,
    )
    assert response.status_code == 200
    pending.refresh_from_db()
    done.refresh_from_db()
    assert pending.status == "cancelled" and done.status == "done"
    assert "already done" in response.content.decode()


def test_api_token_pages_never_show_the_digest(admin_client):
    token = _api_token()
    for view in ("changelist", "change"):
        html = admin_client.get(_admin_url(token, view)).content.decode()
        assert token.token_hash not in html
        assert token.prefix in html


def test_api_token_revoke_action(admin_client):
    token = _api_token()
    admin_client.post(
        "/admin/trust/apitoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]}
    )
    token.refresh_from_db()
    assert token.revoked


def test_audit_records_cannot_be_changed_or_deleted(admin_client):
    call = ToolCallFactory()
    assert admin_client.get(_admin_url(call, "delete")).status_code == 403
    response = admin_client.post(_admin_url(call, "change"), {"tool": "other"})
    assert response.status_code == 403
    call.refresh_from_db()
    assert call.tool == "list_teams"

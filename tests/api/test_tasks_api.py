import pytest

from openhive.engine.models import Session
from tests.api.factories import SessionFactory
from tests.factories import TaskFactory, TeamFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(main_team):
    ops = TeamFactory(name="ops", parent=main_team)
    sales = TeamFactory(name="sales", parent=main_team)
    tasks = [
        TaskFactory(team=ops, text="first", priority=0),
        TaskFactory(team=ops, text="second", status="done", type="trigger"),
        TaskFactory(team=sales, text="third", priority=3),
        TaskFactory(team=sales, text="fourth", status="failed", type="escalation"),
    ]
    return tasks


def _texts(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [t["text"] for t in response.json()["items"]]


def test_tasks_list_is_newest_first_with_count(api_client, queue):
    response = api_client.get("/api/v1/tasks")
    assert _texts(response) == ["fourth", "third", "second", "first"]
    body = response.json()
    assert body["count"] == 4 and body["limit"] == 50 and body["offset"] == 0


def test_tasks_list_item_has_every_field(api_client, queue):
    item = api_client.get("/api/v1/tasks").json()["items"][-1]
    assert item["id"] == queue[0].pk
    assert item["team"] == "ops"
    assert item["type"] == "delegate"
    assert item["priority"] == "critical"
    assert item["status"] == "pending"
    assert set(item) == {
        "id", "team", "type", "priority", "status", "text", "result", "source_channel",
        "topic_id", "correlation_id", "created_at", "started_at", "finished_at",
        "duration_ms", "attempts", "stop_reason", "run_after", "defer_count", "defer_reason",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("team=ops", ["second", "first"]),
        ("status=done", ["second"]),
        ("type=escalation", ["fourth"]),
        ("priority=low", ["third"]),
        ("priority=critical&team=ops", ["first"]),
        ("team=sales&status=pending", ["third"]),
    ],
)
def test_tasks_list_filters(api_client, queue, query, expected):
    assert _texts(api_client.get(f"/api/v1/tasks?{query}")) == expected


def test_tasks_list_paginates_with_limit_and_offset(api_client, queue):
    response = api_client.get("/api/v1/tasks?limit=2&offset=1")
    assert _texts(response) == ["third", "second"]
    assert response.json()["count"] == 4
    assert _texts(api_client.get("/api/v1/tasks?offset=10")) == []


@pytest.mark.parametrize(
    "query",
    [
        "status=bogus",
        "type=nope",
        "priority=urgent",
        "priority=0",
        "limit=0",
        "limit=201",
        "limit=abc",
        "limit=99999999999999999999",
        "offset=-1",
        "offset=99999999999999999999",
        "team=",
        "status=",
    ],
)
def test_tasks_list_with_invalid_filter_is_422_with_detail(api_client, queue, query):
    response = api_client.get(f"/api/v1/tasks?{query}")
    assert response.status_code == 422, response.content
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail[0]["msg"]


@pytest.mark.parametrize("team", ["nope", "%C3%A9quipe", "x" * 64])
def test_tasks_list_for_unknown_team_is_404(api_client, queue, team):
    response = api_client.get(f"/api/v1/tasks?team={team}")
    assert response.status_code == 404
    assert "not found" in response.json()["detail"]


def test_tasks_list_for_a_team_name_with_a_nul_is_a_400_on_every_database(api_client, queue):
    response = api_client.get("/api/v1/tasks?team=a%00b")
    assert response.status_code == 400 and response.json()["code"] == "invalid_text"


def test_task_detail_includes_its_sessions(api_client, queue):
    task = queue[1]
    SessionFactory(team=task.team, task=task, turns=3, prompt_tokens=100, completion_tokens=20)
    SessionFactory(team=task.team, task=task, stop_reason=Session.StopReason.ERROR)
    response = api_client.get(f"/api/v1/tasks/{task.pk}")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == task.pk and body["text"] == "second"
    assert [s["stop_reason"] for s in body["sessions"]] == ["completed", "error"]
    first = body["sessions"][0]
    assert first["turns"] == 3 and first["tokens"] == 120 and first["prompt_tokens"] == 100


@pytest.mark.parametrize(
    "task_id", ["0", "-1", "424242", "99999999999999999999", "9223372036854775808"]
)
def test_task_detail_of_unknown_id_is_404(api_client, queue, task_id):
    response = api_client.get(f"/api/v1/tasks/{task_id}")
    assert response.status_code == 404
    assert "not found" in response.json()["detail"]


@pytest.mark.parametrize("task_id", ["abc", "1.5", "%C3%A9", "1e3"])
def test_task_detail_of_non_integer_id_is_422(api_client, task_id):
    response = api_client.get(f"/api/v1/tasks/{task_id}")
    assert response.status_code == 422
    assert response.json()["detail"]


def test_task_cancel_cancels_a_pending_task(api_client, queue):
    response = api_client.post(f"/api/v1/tasks/{queue[0].pk}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    queue[0].refresh_from_db()
    assert queue[0].status == "cancelled"
    assert "operator" in queue[0].result


def test_task_cancel_of_a_finished_task_is_409_and_changes_nothing(api_client, queue):
    response = api_client.post(f"/api/v1/tasks/{queue[1].pk}/cancel")
    assert response.status_code == 409
    assert response.json()["code"] == "not_cancellable"
    queue[1].refresh_from_db()
    assert queue[1].status == "done"


def test_task_cancel_of_unknown_id_is_404(api_client):
    assert api_client.post("/api/v1/tasks/99999999999999999999/cancel").status_code == 404

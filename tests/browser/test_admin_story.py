"""The admin tells one task's story, in a real Chromium at 1280 px, against the real process
group: teams spawned and a task delegated through the REST API, run by real workers with the
scripted provider; then an operator logs in, reads the dashboard, the task's story, its tree
with the timeline, and a session's conversation.

With OPENHIVE_DOCS_SCREENSHOTS=1 the screenshots also go to docs/screenshots/."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
import yaml
from playwright.sync_api import expect

from .conftest import PASSWORD, ROOT, USERNAME

pytestmark = pytest.mark.e2e

DOCS = ROOT / "docs" / "screenshots"
STORY = {
    "rules": [
        {"when": {"matches": "^Bootstrap"}, "reply": {"content": "Ready."}},
        {
            "when": {"team": "main", "last": "user"},
            "reply": {
                "tool_calls": [
                    {
                        "name": "delegate_task",
                        "arguments": {
                            "team": "ops",
                            "task": "Check the disks of the build servers and free space "
                            "where a disk is above 80%.",
                        },
                    }
                ],
                "usage": {"prompt_tokens": 900, "completion_tokens": 40, "cost_usd": 0.0031},
            },
        },
        {
            "when": {"team": "main", "last": "tool"},
            "reply": {"content": "I've asked the ops team; they will report back."},
        },
        {
            "when": {"team": "ops", "last": "user"},
            "reply": {
                "delay_ms": 300,
                "tool_calls": [
                    {
                        "name": "query_team",
                        "arguments": {"team": "db", "query": "How full is /var on build-1?"},
                    }
                ],
                "usage": {"prompt_tokens": 1200, "completion_tokens": 35, "cost_usd": 0.0042},
            },
        },
        {
            "when": {"team": "ops", "last": "tool", "tool": "query_team"},
            "reply": {
                "delay_ms": 200,
                "tool_calls": [
                    {
                        "name": "delegate_task",
                        "arguments": {"team": "db", "task": "Rotate the logs in /var/log."},
                    }
                ],
                "usage": {"prompt_tokens": 1400, "completion_tokens": 30, "cost_usd": 0.0048},
            },
        },
        {
            "when": {"team": "ops", "last": "tool"},
            "reply": {
                "delay_ms": 200,
                "content": "build-1: /var at 86%, so I asked db to rotate the logs.\n"
                "All other build servers are below 70%.",
                "usage": {"prompt_tokens": 1600, "completion_tokens": 60, "cost_usd": 0.0061},
            },
        },
        {
            "when": {"team": "db", "matches": "(?i)how full"},
            "reply": {
                "delay_ms": 400,
                "content": "/var on build-1 is at 86% (43 of 50 GB).",
                "usage": {"prompt_tokens": 700, "completion_tokens": 25, "cost_usd": 0.0019},
            },
        },
        {
            "when": {"team": "db"},
            "reply": {
                "delay_ms": 700,
                "content": "Rotated the logs in /var/log; 6.2 GB freed.",
                "usage": {"prompt_tokens": 800, "completion_tokens": 20, "cost_usd": 0.0021},
            },
        },
        {"when": {}, "reply": {"content": "ok"}},
    ]
}


@pytest.fixture
def story_provider(tmp_path: Path) -> None:
    """Written before `serve` runs init, which keeps an existing providers.yaml."""
    data = tmp_path / "data"
    (data / "scripts").mkdir(parents=True, exist_ok=True)
    (data / "config").mkdir(parents=True, exist_ok=True)
    (data / "scripts" / "story.yaml").write_text(yaml.safe_dump(STORY))
    (data / "config" / "providers.yaml").write_text(
        "profiles:\n  default:\n    model: scripted/story.yaml\n"
    )


def _api(serve) -> httpx.Client:
    return httpx.Client(
        base_url=f"{serve.base_url}/api/v1",
        headers={"Authorization": f"Bearer {serve.token}"},
        timeout=30,
    )


def _wait(check, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _spawn(api: httpx.Client, name: str, parent: str) -> None:
    response = api.post(
        "/teams",
        json={
            "name": name,
            "parent": parent,
            "description": f"The {name} team",
            "scope_accepts": [name],
        },
    )
    assert response.status_code == 201, response.text
    _wait(lambda: api.get(f"/teams/{name}").json().get("bootstrapped"), f"{name} bootstrapped")


def _run_the_story(serve) -> int:
    with _api(serve) as api:
        _spawn(api, "ops", "main")
        _spawn(api, "db", "ops")
        queued = api.post("/tasks", json={"team": "main", "text": "Have ops check the disks."})
        assert queued.status_code == 201, queued.text

        def finished() -> bool:
            items = api.get("/tasks", params={"limit": 50}).json()["items"]
            mine = [t for t in items if t["type"] != "bootstrap"]
            return len(mine) == 4 and all(t["status"] == "done" for t in mine)

        _wait(finished, "the delegated tree to finish")
        items = api.get("/tasks", params={"team": "ops", "limit": 50}).json()["items"]
        return next(t["id"] for t in items if t["type"] == "delegate")


def _shoot(page, shoot, step: str, docs_name: str) -> None:
    path = shoot(page, step)
    if os.environ.get("OPENHIVE_DOCS_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS / docs_name)


def test_an_operator_reads_a_task_story_in_the_admin(story_provider, page, serve, shoot):
    ops_task = _run_the_story(serve)

    page.goto("/admin/")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    dashboard = page.locator("#dashboard")
    expect(dashboard.get_by_role("heading", name="Tasks by state")).to_be_visible()
    expect(page.locator("#dash-spend")).to_contain_text("ops")
    expect(page.locator("#dash-engine")).to_contain_text("Engine leader")
    expect(page.locator("#dash-providers")).to_contain_text("scripted/story.yaml")
    expect(page.get_by_text("Internal: job runner (django-q2)")).to_be_visible()
    _shoot(page, shoot, "dashboard", "admin-dashboard.png")

    # The task list shows each task's text and result, within 1280 px.
    page.goto("/admin/tasks/task/")
    expect(page.locator("#result_list")).to_contain_text("Check the disks of the build servers")
    expect(page.locator("#result_list")).to_contain_text("Rotated the logs")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    # ... and no column hides behind the list's own horizontal scroll.
    table = page.locator("#result_list")
    assert table.evaluate("t => t.scrollWidth <= t.parentElement.clientWidth")
    expect(page.locator("#result_list thead")).to_contain_text("duration", ignore_case=True)
    shoot(page, "task-list")
    page.get_by_role("link", name=str(ops_task), exact=True).click()

    expect(
        page.get_by_role("heading", name=f"Task #{ops_task} · ops · delegate · done")
    ).to_be_visible()
    story = page.locator("#task-story")
    expect(story.locator("#task-origin")).to_contain_text("main")
    expect(story.locator("#task-children")).to_contain_text("query")
    expect(story.locator("#task-children")).to_contain_text("delegate")
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    _shoot(page, shoot, "task-story", "admin-task-story.png")

    page.get_by_role("link", name="Tree and timeline").click()
    tree = page.locator("#task-tree")
    expect(tree.locator("tr.oh-node")).to_have_count(4)
    timeline = page.locator("#task-timeline")
    expect(timeline.locator(".oh-tl-bar")).to_have_count(4)
    # The bars sit on one axis: the root's session starts first, db's last session ends last.
    boxes = [b.bounding_box() for b in timeline.locator(".oh-tl-bar").all()]
    assert boxes[0]["x"] <= min(b["x"] for b in boxes)
    assert all(b["width"] >= 2 for b in boxes)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    _shoot(page, shoot, "task-tree", "admin-task-tree.png")

    # A session reads as a conversation: the task, the tool calls with arguments, the results.
    tree.get_by_role("link", name=f"Task #{ops_task}").click()
    page.locator("#task-sessions").get_by_role("link").first.click()
    conversation = page.locator("#conversation")
    expect(conversation.locator(".oh-msg.user")).to_contain_text("Check the disks")
    expect(conversation.locator('.oh-call[data-tool="query_team"]')).to_contain_text(
        "How full is /var on build-1?"
    )
    expect(conversation.locator(".oh-msg.tool").first).to_contain_text("86%")
    expect(conversation.locator(".oh-msg.assistant").last).to_contain_text(
        "All other build servers are below 70%."
    )
    _shoot(page, shoot, "conversation", "admin-session.png")

    # The team's page: its config.yaml, profile, tools, recent tasks and spend.
    page.locator("#session-story").get_by_role("link", name="ops", exact=True).click()
    expect(page.get_by_role("heading", name="Team ops")).to_be_visible()
    expect(page.locator("#team-profile")).to_contain_text("scripted/story.yaml")
    expect(page.locator("#team-tools")).to_contain_text("delegate_task")
    expect(page.locator("#team-config")).to_contain_text("provider_profile")
    expect(page.locator("#team-tasks")).to_contain_text("Check the disks of the build servers")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    _shoot(page, shoot, "team", "admin-team.png")

    # Every list an operator reads fits 1280 px, no column behind a horizontal scroll.
    too_wide = []
    for path in (
        "/admin/engine/session/",
        "/admin/engine/toolcall/",
        "/admin/engine/llmexchange/",
        "/admin/teams/team/",
        "/admin/teams/teammessage/",
        "/admin/triggers/triggerconfig/",
    ):
        page.goto(path)
        table = page.locator("#result_list")
        if page.evaluate("document.documentElement.scrollWidth") > 1280 or (
            table.count() and table.evaluate("t => t.scrollWidth > t.parentElement.clientWidth")
        ):
            too_wide.append(path)
    assert too_wide == []

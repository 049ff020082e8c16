"""The chat page in a real browser, against the real process group and the offline demo."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import PASSWORD, USERNAME

pytestmark = pytest.mark.e2e


def log_in(page) -> None:
    page.goto("/chat/")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("status")).to_have_text("Connected")


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_chat_page_needs_a_login(page, shoot):
    page.goto("/chat/")
    assert "/chat/login/" in page.url
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill("wrong-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("did not match")
    shoot(page, "login-refused")


def test_two_topics_a_response_and_a_worker_notification(page, shoot):
    log_in(page)
    thread = page.get_by_role("log").first
    topics = page.get_by_role("navigation", name="Topics")

    send(page, "spawn a team called ops")
    expect(thread).to_contain_text("The ops team is being set up")
    expect(topics.get_by_role("button", name="spawn a team called ops")).to_be_visible()
    # The bootstrap task ran on a django-q2 worker; its result came through the outbox, into
    # the topic that asked for it, naming the team once (no "[ops]" tag beside "from ops").
    expect(thread).to_contain_text("Team bootstrapped and ready.")
    expect(thread.locator("li.delivery").first).to_contain_text("Notification from ops")
    expect(thread).not_to_contain_text("[ops]")
    shoot(page, "first-topic-and-notification")

    page.get_by_role("button", name="+ New topic").click()
    send(page, "which teams are there?")
    expect(thread).to_contain_text("Those are the teams under me")
    expect(page.get_by_role("heading", name="which teams are there?")).to_be_visible()
    expect(topics.get_by_role("listitem")).to_have_count(2)
    shoot(page, "second-topic")

    # Each topic keeps its own thread.
    topics.get_by_role("button", name="spawn a team called ops").click()
    expect(thread).to_contain_text("The ops team is being set up")
    expect(thread).not_to_contain_text("Those are the teams under me")
    topics.get_by_role("button", name="which teams are there?").click()
    expect(thread).to_contain_text("Those are the teams under me")
    expect(thread).not_to_contain_text("being set up")
    shoot(page, "threads-switched")


def test_results_events_and_failures_survive_a_reload(page, shoot):
    log_in(page)
    thread = page.locator("#thread")
    # The first message of a new topic: its tool events are shown as they happen.
    send(page, "spawn a team called ops")
    expect(thread.locator("li.event").filter(has_text="calling spawn_team")).to_be_visible()
    expect(thread.locator("li.event").filter(has_text="spawn_team finished")).to_be_visible()
    expect(thread).to_contain_text("Team bootstrapped and ready.")

    # A tool that fails shows as failed, with the tool's error.
    send(page, "spawn a team called ops")
    failed = thread.locator("li.event.failed")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text('spawn_team failed: team "ops" already exists')
    # Its answer before the next question: one sent sooner shows above it live, while the
    # stored thread puts each answer under its question (the comparison below would differ).
    expect(thread).to_contain_text("The ops team exists already")

    # A team's result arrives through the outbox with its team, its task and a time.
    send(page, "ask ops to check the disks")
    result = thread.locator("li.delivery.result")
    expect(result).to_contain_text("All build servers are below 70% disk usage")
    expect(result).to_contain_text("Result from ops")
    expect(result.locator("a")).to_have_text(re.compile(r"^task #\d+ · done$"))
    admin_link = re.compile(r"^/admin/tasks/task/\d+/change/$")
    expect(result.locator("a")).to_have_attribute("href", admin_link)
    before = thread.locator("li").all_inner_texts()
    shoot(page, "before-reload")

    page.reload()
    expect(page.get_by_role("status")).to_have_text("Connected")
    expect(thread.locator("li.delivery.result")).to_contain_text("All build servers")
    expect(thread.locator("li.event.failed")).to_contain_text('team "ops" already exists')
    expect(thread.locator("li.event").filter(has_text="calling spawn_team")).to_have_count(0)
    expect(thread.locator("li.delivery")).to_have_count(2)  # bootstrap notice, result: once each
    after = thread.locator("li").all_inner_texts()
    # Everything that was there is there after the reload, in the same order (a tool call
    # is stored once, as its outcome: "calling x" lines are live only).
    live = [t for t in before if "\ncalling " not in t and not t.startswith("Tool\ncalling")]
    # (The live time of an event is the page's clock, the stored one the server's: they may
    # fall on either side of a second, so the times are compared only for being there.)
    assert [_untimed(t) for t in after] == [_untimed(t) for t in live]
    assert all(page.locator("#thread li time").evaluate_all("els => els.map(e => !!e.dateTime)"))
    expect(page.locator("#thread")).not_to_contain_text("[ops]")
    shoot(page, "after-reload")


def _untimed(entry: str) -> list[str]:
    return [_CLOCK.sub("<time>", line) for line in entry.split("\n")[1:]]


_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(:\d{2})?(\s?[AP]M)?\b")


def test_the_notifications_panel_holds_what_arrived_outside_the_open_topic(page, shoot):
    log_in(page)
    thread = page.locator("#thread")
    notes = page.locator("#notes")
    topics = page.get_by_role("navigation", name="Topics")
    send(page, "spawn a team called ops")
    expect(thread).to_contain_text("Team bootstrapped and ready.")
    expect(notes.locator("li")).to_have_count(0)  # it is in the open thread: shown once

    page.get_by_role("button", name="+ New topic").click()
    send(page, "ask ops to check the disks")
    expect(thread.locator("li.delivery.result")).to_contain_text("All build servers")
    # The other topic's notice is in the panel, with a way to open its topic.
    expect(notes.locator("li")).to_have_count(1)
    expect(notes).to_contain_text("Notification from ops")
    expect(notes.get_by_role("button", name="in spawn a team called ops")).to_be_visible()
    send(page, "spawn a team called ops")  # fails: the team exists
    expect(thread.locator("li.event.failed")).to_contain_text('team "ops" already exists')
    expect(thread).to_contain_text("exists already")  # the demo script says so, no false success
    shoot(page, "panel")

    notes.get_by_role("button", name="in spawn a team called ops").click()
    expect(page.get_by_role("heading", name="spawn a team called ops")).to_be_visible()
    expect(notes).to_contain_text("All build servers")  # now the other topic's result is here
    expect(notes).not_to_contain_text("Team bootstrapped")
    expect(topics.get_by_role("listitem")).to_have_count(2)


def test_a_reconnect_keeps_the_thread_and_shows_each_delivery_once(page, shoot):
    sockets = []

    def through(ws) -> None:  # the page's socket, passed on to the server, closable by the test
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r"/ws/chat/$"), through)
    log_in(page)
    thread = page.locator("#thread")
    send(page, "spawn a team called ops")
    expect(thread.locator("li.delivery")).to_contain_text("Team bootstrapped and ready.")
    send(page, "ask ops to check the disks")
    expect(thread.locator("li.delivery.result")).to_contain_text("All build servers")
    before = thread.locator("li.delivery").all_inner_texts()

    sockets[-1].close(code=1012, reason="test restart")  # the connection drops
    expect(page.get_by_role("status")).to_contain_text("Disconnected (test restart)")
    expect(page.get_by_role("status")).to_have_text("Connected")
    assert len(sockets) == 2
    expect(thread.locator("li.delivery")).to_have_count(2)
    assert thread.locator("li.delivery").all_inner_texts() == before
    expect(thread.locator("li.event.failed")).to_have_count(0)
    shoot(page, "after-reconnect")

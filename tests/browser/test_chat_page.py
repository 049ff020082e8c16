"""The chat page in a real browser, against the real process group and the offline demo."""

from __future__ import annotations

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
    notes = page.locator("#notes")
    topics = page.get_by_role("navigation", name="Topics")

    send(page, "spawn a team called ops")
    expect(thread).to_contain_text("The ops team is being set up")
    expect(topics.get_by_role("button", name="spawn a team called ops")).to_be_visible()
    # The bootstrap task ran on a django-q2 worker; its result came through the outbox.
    expect(notes).to_contain_text("[ops] Team bootstrapped and ready.")
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

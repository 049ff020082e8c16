"""Rate-limit buckets from a team's config: database-backed token buckets shared by every
session and worker of the team, with a RATE_LIMITED result that says when to retry."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from openhive.tools.models import RateLimitBucket
from openhive.tools.services import BucketRule, ratelimit_take

from .conftest import set_config

BUCKET = BucketRule("news", rps=2, burst=2)


@pytest.mark.django_db
def test_a_bucket_starts_full_refills_continuously_and_says_when_to_retry(ops):
    assert ratelimit_take(team=ops, rules=[BUCKET], now=1000.0).allowed
    assert ratelimit_take(team=ops, rules=[BUCKET], now=1000.0).allowed
    refused = ratelimit_take(team=ops, rules=[BUCKET], now=1000.0)
    assert not refused.allowed and refused.bucket == "news" and refused.retry_after_ms == 500
    later = ratelimit_take(team=ops, rules=[BUCKET], now=1000.25)
    assert not later.allowed and later.retry_after_ms == 250
    assert ratelimit_take(team=ops, rules=[BUCKET], now=1000.5).allowed
    # Idle time refills up to the burst, never beyond it.
    for _ in range(2):
        assert ratelimit_take(team=ops, rules=[BUCKET], now=2000.0).allowed
    assert not ratelimit_take(team=ops, rules=[BUCKET], now=2000.0).allowed


@pytest.mark.django_db
def test_several_buckets_are_all_or_nothing(ops, main_team):
    wide = BucketRule("all", rps=100, burst=100)
    assert ratelimit_take(team=ops, rules=[wide, BucketRule("tight", 1, 1)], now=10.0).allowed
    refused = ratelimit_take(team=ops, rules=[wide, BucketRule("tight", 1, 1)], now=10.0)
    assert refused.bucket == "tight"
    # The refused call took nothing from the wide bucket.
    assert RateLimitBucket.objects.get(team=ops, key="all").tokens == pytest.approx(99)
    # Buckets belong to one team.
    assert ratelimit_take(team=main_team, rules=[BucketRule("tight", 1, 1)], now=10.0).allowed


@pytest.mark.django_db
def test_web_fetch_returns_rate_limited_with_the_retry_time(call, loopback):
    set_config("ops", rate_limit_buckets={"status-page": {"rps": 0.5, "burst": 2}})
    url = loopback.url("/text")
    assert call("web_fetch", url=url, rate_limit_key="status-page")["success"]
    assert call("web_fetch", url=url, rate_limit_key="status-page")["success"]
    refused = call("web_fetch", url=url, rate_limit_key="status-page")
    assert refused["success"] is False and refused["code"] == "RATE_LIMITED"
    assert "status-page" in refused["error"] and "Retry in" in refused["error"]
    assert "retry_after_ms=" in refused["error"]
    assert len(loopback.hits) == 2  # nothing was sent for the refused call
    # No key: no throttling from this bucket; an unknown key is said, not fatal.
    assert call("web_fetch", url=url)["success"]
    unknown = call("web_fetch", url=url, rate_limit_key="typo")
    assert unknown["success"] and "not configured" in unknown["note"]


@pytest.mark.django_db
def test_a_bucket_with_a_domain_applies_even_when_no_key_is_named(call, loopback):
    set_config(
        "ops", rate_limit_buckets={"local": {"rps": 0.01, "burst": 1, "domain": "127.0.0.1"}}
    )
    assert call("web_fetch", url=loopback.url("/text"))["success"]
    assert call("web_fetch", url=loopback.url("/text"))["code"] == "RATE_LIMITED"


@pytest.mark.django_db(transaction=True)
def test_the_bucket_is_shared_by_concurrent_workers(call, loopback):
    """Four workers (threads, each with its own database connection) race for a burst of 5:
    exactly 5 requests go out, across all of them."""
    set_config("ops", rate_limit_buckets={"api": {"rps": 0.001, "burst": 5}})
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def worker() -> None:
        try:
            start.wait()
            for _ in range(5):
                result = call("web_fetch", url=loopback.url("/text"), rate_limit_key="api")
                with lock:
                    outcomes.append("ok" if result["success"] else result["code"])
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["RATE_LIMITED"] * 15 + ["ok"] * 5
    assert len(loopback.hits) == 5

"""State changes of the reach tools: the database-backed token buckets behind web_fetch's
rate limits. A bucket is a row per team and key, updated under a row lock, so every session and
worker of a team — in any process, on any machine — draws from the same tokens."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from teams.models import Team

from .models import McpServerStatus, RateLimitBucket


@dataclass(frozen=True)
class BucketRule:
    key: str
    rps: float
    burst: float


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    bucket: str = ""
    retry_after_ms: int = 0
    rule: BucketRule | None = None


@transaction.atomic
def ratelimit_take(
    *, team: Team, rules: list[BucketRule], now: float | None = None
) -> RateDecision:
    """Take one token from every bucket in `rules`, or none at all if any is empty: then the
    decision names the bucket that refused and when it will have a token again. A bucket starts
    full (`burst` tokens) and refills continuously at `rps` tokens a second."""
    if not rules:
        return RateDecision(True)
    now = time.time() if now is None else now
    by_key = {rule.key: rule for rule in rules}
    rows = _locked(team, sorted(by_key))
    missing = [key for key in by_key if key not in rows]
    if missing:
        RateLimitBucket.objects.bulk_create(
            [
                RateLimitBucket(team=team, key=key, tokens=by_key[key].burst, refilled_at=now)
                for key in missing
            ],
            ignore_conflicts=True,  # another worker may create the same bucket right now
        )
        rows = _locked(team, sorted(by_key))
    levels = {}
    refused: RateDecision | None = None
    for key in sorted(by_key):
        rule, row = by_key[key], rows[key]
        elapsed = max(0.0, now - row.refilled_at)  # clocks of two machines may disagree
        tokens = min(rule.burst, row.tokens + elapsed * rule.rps)
        levels[key] = tokens
        if tokens < 1:
            wait_ms = math.ceil((1 - tokens) / rule.rps * 1000)
            if refused is None or wait_ms > refused.retry_after_ms:
                refused = RateDecision(False, key, wait_ms, rule)
    if refused is not None:
        return refused
    for key, row in rows.items():
        row.tokens = levels[key] - 1
        row.refilled_at = now
        row.save(update_fields=["tokens", "refilled_at"])
    return RateDecision(True)


def _locked(team: Team, keys: list[str]) -> dict[str, RateLimitBucket]:
    # Locked in key order, so two calls that need the same buckets never deadlock.
    rows = RateLimitBucket.objects.select_for_update().filter(team=team, key__in=keys)
    return {row.key: row for row in rows.order_by("key")}


# --- MCP server status -------------------------------------------------------------------------


@transaction.atomic
def mcpstatus_record(
    *,
    team_id: int,
    server: str,
    transport: str,
    state: str,
    fingerprint: str,
    tools: list[dict] | None = None,
    error: str | None = None,
) -> McpServerStatus:
    """Record what a worker knows of a team's MCP server. `tools` None keeps the cached list;
    `error` None keeps the last error (a restart does not hide why the server failed before);
    a failure counts toward the restart backoff and a successful start resets it."""
    row, _ = McpServerStatus.objects.select_for_update().get_or_create(
        team_id=team_id,
        server=server,
        defaults={"transport": transport, "fingerprint": fingerprint, "updated_at": timezone.now()},
    )
    if row.fingerprint != fingerprint:
        row.tools, row.failures = [], 0  # a new definition: the old tool list says nothing
    row.transport, row.state, row.fingerprint = transport, state, fingerprint
    row.pid = os.getpid() if state == McpServerStatus.State.RUNNING else None
    if tools is not None:
        row.tools = tools
    if error is not None:
        row.last_error = error[:4000]
    if state == McpServerStatus.State.FAILED:
        row.failures += 1
    elif state == McpServerStatus.State.RUNNING:
        row.failures = 0
    row.updated_at = timezone.now()
    row.save()
    return row

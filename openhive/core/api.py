"""What every REST router shares: the page shape of list endpoints and who is asking."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from django.http import HttpRequest
from django.utils import timezone
from ninja import Schema
from pydantic import AfterValidator


class Page(Schema):
    """A page of a list: `items` (declared by each list) from `offset`, of `count` in all."""

    count: int
    limit: int
    offset: int


def request_actor(request: HttpRequest) -> str:
    """The API user's name as recorded on what the request creates (e.g. `created_by`)."""
    return getattr(request.auth, "username", "") or "api"


def _as_utc(value: datetime) -> datetime:
    # Databases disagree on what they accept (PostgreSQL refuses offsets past ±16 h, SQLite
    # compares text): every instant is compared in UTC, and one that has none is in TZ.
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise ValueError("the instant is outside the range of dates that can be stored") from exc


Instant = Annotated[datetime, AfterValidator(_as_utc)]
"""A datetime from a query or body, normalised to UTC (naive values are read in TZ)."""

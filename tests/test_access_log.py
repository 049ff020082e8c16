"""The access log: one line per request through `logging`, credentials in query strings masked."""

from __future__ import annotations

import logging

import httpx
import pytest

from openhive.asgi import application
from openhive.core.accesslog import safe_query


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        (b"", ""),
        (b"token=ohk_abc", "?token=***"),
        (b"since=2026-01-01&api_key=k1&team=ops", "?since=2026-01-01&api_key=***&team=ops"),
        (b"Password=p&x=", "?Password=***&x="),
    ],
)
def test_credentials_in_query_strings_are_masked(query, shown):
    assert safe_query(query) == shown


@pytest.mark.django_db(transaction=True)
async def test_each_request_is_one_log_line_through_logging(caplog):
    caplog.set_level(logging.INFO, logger="openhive.access")
    transport = httpx.ASGITransport(app=application, client=("127.0.0.9", 5555))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.get("/api/v1/health?token=ohk_secret_value")
    assert response.status_code == 200
    [line] = [r.getMessage() for r in caplog.records if r.name == "openhive.access"]
    assert line.startswith('127.0.0.9 "GET /api/v1/health?token=***" 200 ')
    assert "ohk_secret_value" not in caplog.text

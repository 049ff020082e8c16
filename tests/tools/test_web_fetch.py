"""web_fetch through call_tool, as a session calls it, against loopback servers only: the
exempt one (OPENHIVE_SSRF_ALLOW) answers; everything else is refused before any traffic."""

from __future__ import annotations

import json

import pytest

from openhive.core import scrubbing
from openhive.engine.models import ToolCall
from vault.services import vault_set, vault_store_secret

from .conftest import set_config

pytestmark = pytest.mark.django_db

SECRET = "bearer-Hx72pQv0LmZ3"


def test_fetches_text_from_an_exempt_loopback_server(call, loopback):
    result = call("web_fetch", url=loopback.url("/text"))
    assert result["success"], result
    assert result["status"] == 200 and result["ok"] is True
    assert result["body"] == "hello from loopback" and result["format"] == "text"
    assert result["truncated"] is False and result["bytes"] == 19


def test_html_comes_back_as_readable_text_unless_raw(call, loopback):
    result = call("web_fetch", url=loopback.url("/html"))
    assert result["format"] == "html-text"
    body = result["body"]
    assert "Service status" in body and "operational" in body
    assert (
        "<" not in body.replace("<http", "")
        and "var secret" not in body
        and "color:red" not in body
    )
    assert "API" in body and "https://example.org/history" in body  # tables and links kept
    raw = call("web_fetch", url=loopback.url("/html"), raw=True)
    assert raw["format"] == "html" and raw["body"].startswith("<!doctype html>")


def test_binary_bodies_are_described_not_dumped(call, loopback):
    result = call("web_fetch", url=loopback.url("/image"))
    assert result["format"] == "binary" and "image/png" in result["body"]


def test_body_is_capped_at_one_mebibyte_with_a_flag(call, loopback):
    result = call("web_fetch", url=loopback.url("/big"))
    assert result["truncated"] is True and result["bytes"] == 1024 * 1024
    assert len(result["body"]) == 1024 * 1024


def test_the_cap_holds_after_decompression(call, loopback):
    bomb = call("web_fetch", url=loopback.url("/gzip-bomb"))
    assert bomb["truncated"] is True and bomb["bytes"] == 1024 * 1024
    small = call("web_fetch", url=loopback.url("/gzip"))
    assert small["body"] == "zipped text"


def test_methods_bodies_and_non_2xx_statuses(call, loopback):
    posted = call("web_fetch", url=loopback.url("/anything"), method="POST", body='{"a": 1}')
    assert json.loads(posted["body"]) == {"method": "POST", "body": '{"a": 1}'}
    head = call("web_fetch", url=loopback.url("/text"), method="HEAD")
    assert head["status"] == 200 and head["body"] == ""
    missing = call("web_fetch", url=loopback.url("/missing"))
    assert missing["success"] and missing["status"] == 404 and missing["ok"] is False


def test_timeout_covers_the_whole_request(call, loopback):
    slow = call("web_fetch", url=loopback.url("/slow?seconds=3"), timeout_seconds=1)
    assert slow["success"] is False and slow["code"] == "TIMEOUT"
    drip = call("web_fetch", url=loopback.url("/drip"), timeout_seconds=2)
    assert drip["code"] == "TIMEOUT"
    too_long = call("web_fetch", url=loopback.url("/text"), timeout_seconds=61)
    assert too_long["code"] == "INVALID_ARGUMENTS"


def test_loopback_without_the_exemption_is_blocked_before_any_traffic(call, other_loopback):
    for url in (
        other_loopback.url("/text"),
        f"http://localhost:{other_loopback.port}/text",
        f"http://2130706433:{other_loopback.port}/text",
        f"http://[::ffff:127.0.0.1]:{other_loopback.port}/text",
        f"http://0x7f.1:{other_loopback.port}/text",
    ):
        result = call("web_fetch", url=url)
        assert result["success"] is False and result["code"] == "SSRF_BLOCKED", (url, result)
    assert other_loopback.hits == []


def test_a_redirect_to_a_disallowed_destination_is_refused(call, loopback, other_loopback):
    for to in (
        other_loopback.url("/text"),
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "file:///etc/passwd",
    ):
        result = call("web_fetch", url=loopback.url(f"/redirect?to={to}"))
        assert result["code"] == "SSRF_BLOCKED", (to, result)
    assert other_loopback.hits == []


def test_redirects_are_followed_by_hand_and_capped(call, loopback):
    ok = call("web_fetch", url=loopback.url(f"/redirect?to={loopback.url('/text')}"))
    assert ok["body"] == "hello from loopback"
    assert ok["redirects"] == [loopback.url(f"/redirect?to={loopback.url('/text')}")]
    relative = call("web_fetch", url=loopback.url("/redirect?to=/json"))
    assert relative["body"] == '{"ok": true}'
    loop = call("web_fetch", url=loopback.url("/loop"))
    assert loop["code"] == "TOO_MANY_REDIRECTS"
    assert sum(1 for hit in loopback.hits if hit[1] == "/loop") == 6
    see_other = call(
        "web_fetch", url=loopback.url("/redirect?status=303&to=/text"), method="POST", body="x"
    )
    assert see_other["body"] == "hello from loopback" and loopback.hits[-1][0] == "GET"


def test_domain_allowlist_of_the_team(call, loopback):
    set_config("ops", web={"allowed_domains": ["api.example.com"]})
    refused = call("web_fetch", url=loopback.url("/text"))
    assert refused["code"] == "DOMAIN_NOT_ALLOWED" and "api.example.com" in refused["error"]
    set_config("ops", web={"allowed_domains": ["127.0.0.1"]})
    assert call("web_fetch", url=loopback.url("/text"))["success"]


def test_userinfo_and_other_schemes_are_refused(call, loopback):
    assert call("web_fetch", url=f"http://u:p@{loopback.authority}/")["code"] == "SSRF_BLOCKED"
    assert call("web_fetch", url="file:///etc/passwd")["code"] == "SSRF_BLOCKED"
    assert loopback.hits == []


@pytest.mark.usefixtures("vault_key")
def test_vault_header_references_are_sent_but_never_shown_or_stored(call, ops, loopback):
    vault_store_secret(team=ops, key="api_token", value=SECRET, updated_by="test")
    vault_set(team=ops, key="account", value="acct-00042-plain", updated_by="test")
    scrubbing.invalidate()
    result = call(
        "web_fetch",
        url=loopback.url("/echo"),
        headers=[
            {"name": "Authorization", "value": "Bearer {{vault:api_token}}"},
            {"name": "X-Account", "value": "{{ vault:account }}"},
        ],
    )
    assert result["success"], result
    sent = loopback.hits[-1][2]
    assert sent["Authorization"] == f"Bearer {SECRET}" and sent["X-Account"] == "acct-00042-plain"
    # The server echoed both back: the model sees neither value, the audit stores neither.
    assert SECRET not in json.dumps(result) and "acct-00042-plain" not in json.dumps(result)
    row = ToolCall.objects.get(tool="web_fetch")
    assert SECRET not in json.dumps([row.arguments, row.result, row.error])
    assert row.arguments["headers"][0]["value"] == "Bearer {{vault:api_token}}"
    missing = call(
        "web_fetch", url=loopback.url("/echo"), headers=[{"name": "X", "value": "{{vault:nope}}"}]
    )
    assert missing["code"] == "NOT_FOUND"


@pytest.mark.usefixtures("vault_key")
def test_credentials_do_not_follow_a_redirect_to_another_origin(
    call, ops, loopback, settings, other_loopback
):
    settings.OPENHIVE = {
        **settings.OPENHIVE,
        "SSRF_ALLOW": [loopback.authority, other_loopback.authority],
    }
    vault_store_secret(team=ops, key="api_token", value=SECRET, updated_by="test")
    scrubbing.invalidate()
    result = call(
        "web_fetch",
        url=loopback.url(f"/redirect?to={other_loopback.url('/echo')}"),
        headers=[
            {"name": "X-Api-Key", "value": "{{vault:api_token}}"},
            {"name": "Authorization", "value": "Basic abc"},
            {"name": "Accept", "value": "application/json"},
        ],
    )
    assert result["success"], result
    echoed = json.loads(result["body"])
    assert "x-api-key" not in echoed and "authorization" not in echoed
    assert echoed["accept"] == "application/json"
    assert loopback.hits[-1][2]["X-Api-Key"] == SECRET  # the first origin got it


def test_forbidden_headers_are_refused(call, loopback):
    for name in ("Host", "Content-Length", "bad name"):
        result = call(
            "web_fetch", url=loopback.url("/echo"), headers=[{"name": name, "value": "x"}]
        )
        assert result["code"] == "INVALID_HEADER", name
    assert loopback.hits == []

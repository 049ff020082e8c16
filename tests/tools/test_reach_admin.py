"""The back office shows recent file writes and fetches per team, from the audit."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_writes_and_fetches_are_listed_per_team(admin_client, call, loopback, main_team):
    call("write_file", path="reports/a.md", content="a")
    call("edit_file", path="reports/a.md", old_string="a", new_string="b")
    call("web_fetch", url=loopback.url("/text"))
    call("web_fetch", url="http://169.254.169.254/")
    call("read_file", path="reports/a.md")  # a read is neither a write nor a fetch
    call("write_file", team=main_team, path="x.md", content="x")

    page = admin_client.get("/admin/tools/reachcall/").content.decode()
    assert "Last 24 hours per team" in page
    assert "reports/a.md" in page and loopback.url("/text") in page
    assert "HTTP 200, 19 bytes" in page and "SSRF_BLOCKED" in page
    assert "1 bytes written" in page and "1 replacement(s)" in page
    assert "read_file" not in page.split("Last 24 hours per team")[1].split("<tbody>", 2)[-1]

    only_main = admin_client.get("/admin/tools/reachcall/?team_name=main").content.decode()
    assert "x.md" in only_main and "reports/a.md" not in only_main
    for path in ("/admin/tools/reachcall/", "/admin/tools/ratelimitbucket/"):
        assert admin_client.get(path).status_code == 200

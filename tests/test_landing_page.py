"""The README's URL, http://localhost:8000/, is a page that leads to every door."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

DOORS = ["/chat/", "/admin/", "/api/v1/docs", "/api/v1/health"]


def test_the_root_url_is_a_landing_page_linking_chat_admin_api_docs_and_health():
    response = Client().get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>OpenHive</title>" in html
    for door in DOORS:
        assert f'href="{door}"' in html


def test_every_link_on_the_landing_page_answers(admin_client):
    html = Client().get("/").content.decode()
    for door in DOORS:
        assert f'href="{door}"' in html
        # Followed as a signed-in operator: none is a 404 or an error.
        assert admin_client.get(door, follow=True).status_code == 200, door


def test_the_landing_page_says_how_to_get_a_provider_when_none_is_configured():
    html = Client().get("/").content.decode()
    assert "No usable model provider" in html
    assert "manage.py openhive init --demo" in html


def test_the_landing_page_says_a_provider_is_configured(scripted_provider):
    scripted_provider([{"when": {}, "reply": {"content": "ok"}}])
    html = Client().get("/").content.decode()
    assert "A model provider is configured." in html

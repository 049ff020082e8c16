"""The landing page at `/`: where the README's URL leads, linking every door."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from openhive.engine.providers import providers_configured

API_ROOT = "/api/v1/"  # where openhive/urls.py mounts the REST API


def landing_page(request: HttpRequest) -> HttpResponse:
    try:
        configured = providers_configured()
    except Exception:  # an unreadable providers.yaml must not take the front page down
        configured = False
    return render(
        request,
        "landing.html",
        {
            "chat_url": reverse("chat:page"),
            "admin_url": reverse("admin:index"),
            # Ninja's URL names carry its version; the mount point is what the README names.
            "docs_url": API_ROOT + "docs",
            "health_url": API_ROOT + "health",
            "provider_configured": configured,
        },
    )

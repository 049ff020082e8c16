"""The admin's usage page (/admin/usage/): spend by team, task, trigger and day, each beside
its budget. Linked from the engine section of the admin index."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_date

from openhive.core.errors import DomainError
from openhive.core.scrubbing import scrub
from openhive.engine.budgets import budgets_file
from openhive.usage import default_window, usage_report


def _day(value: str | None) -> datetime | None:
    day = parse_date(value or "")
    if day is None:
        return None
    return timezone.make_aware(datetime.combine(day, time.min))


def usage_view(request: HttpRequest) -> HttpResponse:
    since, until = default_window()
    error = ""
    chosen_since, chosen_until = _day(request.GET.get("since")), _day(request.GET.get("until"))
    since = chosen_since or since
    until = chosen_until + timedelta(days=1) if chosen_until else until
    report: dict = {}
    if since >= until:
        error = "The first day must not be after the last."
    else:
        try:
            report = usage_report(since=since, until=until)
        except DomainError as exc:  # an invalid budgets.yaml: say so, show nothing
            error = scrub(exc.message)
    context = {
        **admin.site.each_context(request),
        "title": "Usage and budgets",
        "report": report,
        "since": since,
        "until_day": until - timedelta(seconds=1),
        "error": error,
        "budgets_file": budgets_file(),
    }
    return TemplateResponse(request, "admin/usage.html", context)


def _install_usage_page(site: admin.AdminSite) -> None:
    get_urls = site.get_urls
    get_app_list = site.get_app_list

    def urls() -> list[URLPattern]:
        return [path("usage/", site.admin_view(usage_view), name="usage"), *get_urls()]

    def app_list(request: HttpRequest, app_label: str | None = None) -> list[dict]:
        apps = get_app_list(request, app_label)
        for app in apps:
            if app["app_label"] == "engine":
                app["models"].append(
                    {
                        "name": "Usage and budgets",
                        "object_name": "Usage",
                        "perms": {"view": True},
                        "admin_url": reverse("admin:usage", current_app=site.name),
                        "add_url": None,
                        "view_only": True,
                    }
                )
        return apps

    site.get_urls = urls  # type: ignore[method-assign]
    site.get_app_list = app_list  # type: ignore[method-assign]


_install_usage_page(admin.site)


# --- the index: a dashboard above the app list; django-q2's tables grouped as internal ---------

INTERNAL_APPS = {"django_q": "Internal: job runner (django-q2)"}
# What an operator looks at first comes first: the work, the org, the sessions.
APP_ORDER = ("tasks", "teams", "engine", "chat", "triggers", "memory", "vault", "trust", "tools")


def _install_dashboard(site: admin.AdminSite) -> None:
    index = site.index
    get_app_list = site.get_app_list

    def dashboard_index(request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        from openhive.dashboard import dashboard

        return index(request, {"dashboard": dashboard(), **(extra_context or {})})

    def app_list(request: HttpRequest, app_label: str | None = None) -> list[dict]:
        # django-q2 only executes `run_task(id)`; its rows are the runner's bookkeeping, not
        # the queue (that is Tasks). Named as such and listed last.
        apps = get_app_list(request, app_label)
        ours = sorted(
            (a for a in apps if a["app_label"] not in INTERNAL_APPS),
            key=lambda a: (
                APP_ORDER.index(a["app_label"]) if a["app_label"] in APP_ORDER else len(APP_ORDER)
            ),
        )
        internal = [a for a in apps if a["app_label"] in INTERNAL_APPS]
        for app in internal:
            app["name"] = INTERNAL_APPS[app["app_label"]]
        return ours + internal

    site.index = dashboard_index  # type: ignore[method-assign]
    site.get_app_list = app_list  # type: ignore[method-assign]


_install_dashboard(admin.site)

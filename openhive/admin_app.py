"""Django's admin app without discovery at start-up.

`django.contrib.admin`'s default config imports every app's admin.py (and the forms, services
and schemas they import) in every process, at `django.setup()`. Only the web process serves the
admin: here the ModelAdmins are discovered by the URLconf (openhive/urls.py) and by the admin's
system checks, so a worker or a `manage.py` verb does not carry them (~3 MB of a worker)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import SimpleAdminConfig
from django.contrib.admin.checks import check_admin_app, check_dependencies
from django.core import checks


class AdminConfig(SimpleAdminConfig):
    def ready(self) -> None:
        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(check_discovered_admin, checks.Tags.admin)


def check_discovered_admin(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Django's checks of the registered ModelAdmins, once they are registered: the checks run
    in no fixed order, so this one cannot count on the URLconf's check having imported them."""
    admin.autodiscover()
    return check_admin_app(app_configs, **kwargs)

from django.apps import AppConfig

from openhive.core.heap import start_done


class StartedConfig(AppConfig):
    """Last in INSTALLED_APPS, so its ready() runs once every app is loaded and ready: the end
    of start-up, where the garbage collector comes back on (`openhive.core.heap.quiet_start`).
    A package of its own, with nothing else in it: an app's folder is searched for templates,
    static files and management commands."""

    name = "openhive.started"
    label = "openhive_started"
    verbose_name = "OpenHive start-up"

    def ready(self) -> None:
        start_done()

from django.apps import AppConfig


class OpenHiveConfig(AppConfig):
    """The project package as an app: management commands, system rules, and the tool registry."""

    name = "openhive"
    label = "openhive"
    verbose_name = "OpenHive"

    def ready(self) -> None:
        from openhive.tools import registry

        registry.autodiscover()

from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "teams"
    verbose_name = "Teams (org tree)"

    def ready(self) -> None:
        from . import messaging  # noqa: F401  (registers the inbox prompt section)

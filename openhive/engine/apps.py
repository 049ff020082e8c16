from django.apps import AppConfig

from openhive.core.scrubbing import register_secret_source


class EngineConfig(AppConfig):
    name = "openhive.engine"
    label = "engine"
    verbose_name = "Engine (sessions and audit)"

    def ready(self) -> None:
        from .providers import provider_secret_values

        register_secret_source("providers", provider_secret_values)

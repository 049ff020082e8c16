from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "openhive.engine"
    label = "engine"
    verbose_name = "Engine (sessions and audit)"

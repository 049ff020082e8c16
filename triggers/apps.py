from django.apps import AppConfig


class TriggersConfig(AppConfig):
    name = "triggers"
    verbose_name = "Triggers"

    def ready(self) -> None:
        # Registers the trigger clock on the engine loop and the chat and task-end receivers.
        from . import engine  # noqa: F401

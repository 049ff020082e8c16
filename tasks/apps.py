from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Tasks (durable queue)"

    def ready(self) -> None:
        from . import jobs  # noqa: F401  (registers the stall detector with the engine loop)

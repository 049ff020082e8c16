from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "openhive.chat"
    label = "chat"
    verbose_name = "Chat (topics, messages, outbox)"

    def ready(self) -> None:
        from . import jobs  # noqa: F401  (registers the clock job)

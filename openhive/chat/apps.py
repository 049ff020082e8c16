from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "openhive.chat"
    label = "chat"
    verbose_name = "Chat (topics, messages, outbox)"

    def ready(self) -> None:
        from .close_reason import install

        install()  # close frames carry their reason under daphne too (if daphne is loaded)

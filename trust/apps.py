from django.apps import AppConfig


class TrustConfig(AppConfig):
    name = "trust"
    verbose_name = "Trust (senders and API tokens)"

from django.apps import AppConfig


class OrgConfig(AppConfig):
    """Use cases over the org tree (spawn, shutdown) and their doors. No models of its own."""

    name = "openhive.org"
    label = "org"
    verbose_name = "Organisation"

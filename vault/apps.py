from django.apps import AppConfig

from openhive.core.scrubbing import register_secret_source


class VaultConfig(AppConfig):
    name = "vault"
    verbose_name = "Vault (secrets and team state)"

    def ready(self) -> None:
        # Models are importable only once apps are loaded, so the selector is imported here.
        from .selectors import vault_secret_values, vault_secrets_read

        register_secret_source("vault", vault_secret_values, read=vault_secrets_read)

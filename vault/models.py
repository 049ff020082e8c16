from django.db import models


class VaultEntry(models.Model):
    """A team's key/value entry. Secret rows hold Fernet ciphertext in `value` and are
    system-managed: written by spawn credentials, the admin or the API, never by a team."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="vault")
    key = models.CharField(max_length=200)
    value = models.TextField()
    is_secret = models.BooleanField(default=False)
    updated_by = models.CharField(max_length=100, blank=True, default="")
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team_id", "key"]
        verbose_name_plural = "vault entries"
        constraints = [models.UniqueConstraint(fields=["team", "key"], name="uniq_vault_key")]

    def __str__(self) -> str:
        return f"{self.team.name}:{self.key}{' (secret)' if self.is_secret else ''}"

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A bearer token for the REST API and the chat socket. Only its SHA-256 is stored; the
    plain token is shown once, when it is created. Its scope says what it may do: by default
    what its user may (a staff user operates, anyone else chats and reads their own topics);
    `operator` grants operator rights explicitly, `chat` restricts even a staff user's token."""

    class Scope(models.TextChoices):
        USER = "user", "the user's own rights"
        OPERATOR = "operator", "operator (every API operation)"
        CHAT = "chat", "chat and its own topics only"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=12)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    scope = models.CharField(max_length=20, choices=Scope.choices, default=Scope.USER)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"


class SenderTrust(models.Model):
    """A stored grant or denial for one sender; global when channel_id is empty."""

    channel_type = models.CharField(max_length=40)
    channel_id = models.CharField(max_length=200, blank=True, default="")
    sender_id = models.CharField(max_length=200)
    trust_level = models.CharField(max_length=20, default="trusted")
    granted_by = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["channel_type", "sender_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["channel_type", "channel_id", "sender_id"], name="uniq_sender_trust"
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel_type}:{self.sender_id} {self.trust_level}"


class TrustAuditLog(models.Model):
    """Every trust decision, in order."""

    channel_type = models.CharField(max_length=40)
    channel_id = models.CharField(max_length=200, blank=True, default="")
    sender_id = models.CharField(max_length=200)
    sender_asserted = models.BooleanField(default=False)
    decision = models.CharField(max_length=10)
    reason = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.sender_id} {self.decision} ({self.reason})"

from django.db import models

TEAM_NAME_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
MAIN_TEAM = "main"


class Team(models.Model):
    """A node of the org tree. `main` is the root; every other team has exactly one parent."""

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        SHUTTING_DOWN = "shutting_down", "shutting down"

    name = models.SlugField(max_length=64, unique=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    description = models.TextField(blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    bootstrapped = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ScopeKeyword(models.Model):
    """A keyword that says which work a team accepts (used for routing), stored lowercase."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="scope_keywords")
    keyword = models.CharField(max_length=100)

    class Meta:
        ordering = ["keyword"]
        constraints = [
            models.UniqueConstraint(fields=["team", "keyword"], name="uniq_team_keyword")
        ]

    def __str__(self) -> str:
        return self.keyword


class TeamMessage(models.Model):
    """A message between a team and its parent or child (send_message), or an escalation to the
    parent. Durable: the recipient sees unread ones in its next session, operators in the admin."""

    class Kind(models.TextChoices):
        MESSAGE = "message"
        ESCALATION = "escalation"

    sender = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="sent_messages")
    recipient = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="inbox")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.MESSAGE)
    content = models.TextField()
    reason = models.CharField(max_length=500, blank=True, default="")
    correlation_id = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when the message was shown in one of the recipient's sessions.
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(
                fields=["recipient", "id"],
                name="teammessage_unread_idx",
                condition=models.Q(delivered_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        # No content: it is shown (scrubbed) only where the admin decides to.
        return f"#{self.pk} {self.kind} {self.sender_id}->{self.recipient_id}"

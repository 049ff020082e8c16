from django.db import models


class Memory(models.Model):
    """Something a team learned and wants across its disposable sessions. Search and embeddings
    arrive with the memory capability; this is the table."""

    class Type(models.TextChoices):
        IDENTITY = "identity"
        LESSON = "lesson"
        DECISION = "decision"
        CONTEXT = "context"
        REFERENCE = "reference"
        HISTORICAL = "historical"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="memories")
    key = models.CharField(max_length=200)
    content = models.TextField()
    type = models.CharField(max_length=12, choices=Type.choices, default=Type.CONTEXT)
    active = models.BooleanField(default=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    supersede_reason = models.TextField(blank=True, default="")
    updated_by = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team_id", "key", "-created_at"]
        verbose_name_plural = "memories"

    def __str__(self) -> str:
        return f"{self.team_id}:{self.key}"

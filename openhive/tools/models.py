"""Rate-limit token buckets (one row per team and bucket key, shared by every session and
worker of the team) and the audit rows of the reach tools as seen in the admin."""

from django.db import models

from openhive.engine.models import ToolCall


class RateLimitBucket(models.Model):
    team = models.ForeignKey(
        "teams.Team", on_delete=models.CASCADE, related_name="rate_limit_buckets"
    )
    key = models.CharField(max_length=100)
    tokens = models.FloatField()
    # Epoch seconds of the last refill: a float, because buckets refill many times a second.
    refilled_at = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "key"], name="tools_bucket_team_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.team.name}:{self.key}"


class ReachCall(ToolCall):
    """Tool-call audit rows of the file-writing and fetching tools, for the admin."""

    class Meta:
        proxy = True
        verbose_name = "file write or fetch"
        verbose_name_plural = "recent file writes and fetches"

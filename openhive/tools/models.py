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
        return f"{self.team_id}:{self.key}"


class ReachCall(ToolCall):
    """Tool-call audit rows of the file-writing and fetching tools, for the admin."""

    class Meta:
        proxy = True
        verbose_name = "file write or fetch"
        verbose_name_plural = "recent file writes and fetches"


class Plugin(models.Model):
    """A team's own tool: one Python module under `plugins/{tool_name}.py` of its workspace,
    offered to its sessions as `plugin__{tool_name}`. The file's SHA-256 is kept here: a file
    that no longer matches is never run. Removed rows stay, for the audit trail; a removed
    name may be registered again (a new row)."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        DEPRECATED = "deprecated"
        FAILED_VERIFICATION = "failed_verification"
        REMOVED = "removed"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="plugins")
    tool_name = models.CharField(max_length=56)
    status = models.CharField(
        max_length=24, choices=Status.choices, default=Status.ACTIVE, db_index=True
    )
    source_path = models.CharField(max_length=300)  # relative to the team's workspace
    source_hash = models.CharField(max_length=64)  # SHA-256 of the source, hex
    description = models.TextField()
    # The JSON Schema of run()'s argument, as the interface check read it in the sandbox.
    parameters = models.JSONField(default=dict)
    version = models.PositiveIntegerField(default=1)  # bumped on each re-registration
    registered_by = models.CharField(max_length=100, blank=True, default="")
    verified_at = models.DateTimeField(null=True, blank=True)
    status_reason = models.TextField(blank=True, default="")
    status_changed_by = models.CharField(max_length=100, blank=True, default="")
    status_changed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team_id", "tool_name", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "tool_name"],
                condition=~models.Q(status="removed"),
                name="tools_plugin_team_name_live_unique",
            )
        ]

    def __str__(self) -> str:
        return f"plugin__{self.tool_name} ({self.team_id}, {self.status})"

    @property
    def offered_name(self) -> str:
        return f"plugin__{self.tool_name}"

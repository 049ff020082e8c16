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


class McpServerStatus(models.Model):
    """The last known state of one team's MCP server, written by the worker process that runs
    it, so the admin (another process) can show it: state, tools and the last error. The tool
    list doubles as a cache: a session can be offered the tools without starting the server,
    as long as the server's definition (`fingerprint`) is unchanged."""

    class State(models.TextChoices):
        STARTING = "starting"
        RUNNING = "running"
        STOPPED = "stopped"
        FAILED = "failed"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="mcp_servers")
    server = models.CharField(max_length=40)
    transport = models.CharField(max_length=10)  # stdio or http
    state = models.CharField(max_length=10, choices=State.choices, default=State.STOPPED)
    # [{"name", "description", "input_schema"}] as the server listed them (already scrubbed).
    tools = models.JSONField(default=list, blank=True)
    fingerprint = models.CharField(max_length=64, blank=True)
    last_error = models.TextField(blank=True)
    failures = models.PositiveIntegerField(default=0)
    pid = models.PositiveIntegerField(null=True, blank=True)  # the worker running it
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name = "MCP server"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "server"], name="tools_mcpstatus_team_server_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.team_id}:{self.server}"

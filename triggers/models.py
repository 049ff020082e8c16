from django.db import models


class TriggerConfig(models.Model):
    """A rule that wakes a team: a cron schedule, an inbound message, a keyword or a watch
    window. The firing engine arrives with the trigger capability; this is the table."""

    class Type(models.TextChoices):
        SCHEDULE = "schedule"
        MESSAGE = "message"
        KEYWORD = "keyword"
        WINDOW = "window"

    class State(models.TextChoices):
        PENDING = "pending"
        ACTIVE = "active"
        DISABLED = "disabled"

    class OverlapPolicy(models.TextChoices):
        SKIP_THEN_REPLACE = "skip-then-replace"
        ALWAYS_SKIP = "always-skip"
        ALWAYS_REPLACE = "always-replace"
        ALLOW = "allow"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="triggers")
    name = models.SlugField(max_length=100)
    type = models.CharField(max_length=10, choices=Type.choices)
    config = models.JSONField(default=dict)
    task = models.TextField()
    subagent = models.CharField(max_length=100, blank=True, default="")
    skill = models.CharField(max_length=100, blank=True, default="")
    max_turns = models.PositiveIntegerField(null=True, blank=True)
    failure_threshold = models.PositiveSmallIntegerField(default=3)
    consecutive_failures = models.PositiveSmallIntegerField(default=0)
    overlap_policy = models.CharField(
        max_length=20, choices=OverlapPolicy.choices, default=OverlapPolicy.SKIP_THEN_REPLACE
    )
    overlap_count = models.PositiveIntegerField(default=0)
    active_task = models.ForeignKey(
        "tasks.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    timezone = models.CharField(max_length=64, blank=True, default="")
    misfire_policy = models.CharField(max_length=10, default="skip")
    source_channel = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team_id", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="uniq_trigger_name")]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.name} ({self.type}, {self.state})"

from django.db import models


class TriggerConfig(models.Model):
    """A rule that wakes a team: a cron schedule, an inbound message, a keyword or a watch
    window. Decisions live in `triggers.decisions`; the clock state below is what they read."""

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

    class MisfirePolicy(models.TextChoices):
        SKIP = "skip"
        RUN_ONCE = "run_once"

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
    misfire_policy = models.CharField(
        max_length=10, choices=MisfirePolicy.choices, default=MisfirePolicy.SKIP
    )
    # Who owns it: the chat channel, topic and sender of the chat turn that created it. Its
    # runs' notifications and its alerts go there; a trigger made elsewhere (admin, REST) has
    # none and only the operators see its alerts.
    source_channel = models.CharField(max_length=200, blank=True, default="")
    owner = models.CharField(max_length=200, blank=True, default="")
    owner_topic = models.ForeignKey(
        "chat.Topic", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Clock state. schedule: the next cron slot not yet fired (advanced before enqueuing, so a
    # slot fires at most once); window: when the next tick is due while the window is open.
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    window_opened_at = models.DateTimeField(null=True, blank=True)
    # The last minute the clock saw the window open: a gap with a closed minute in it means a
    # new occurrence (and fresh caps) even if the engine slept through the close.
    window_seen_at = models.DateTimeField(null=True, blank=True)
    window_ticks = models.PositiveIntegerField(default=0)
    last_alert = models.TextField(blank=True, default="")
    last_alert_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team_id", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="uniq_trigger_name")]

    def __str__(self) -> str:
        return f"{self.team.name}/{self.name} ({self.type}, {self.state})"


class TriggerEvent(models.Model):
    """One firing attempt of a trigger, keyed by its event (cron slot, window tick, chat
    message). The unique key is the dedup; recent rows feed the rate limit and the history."""

    class Outcome(models.TextChoices):
        FIRED = "fired"
        REPLACED = "replaced"
        SKIPPED = "skipped"
        RATE_LIMITED = "rate_limited"

    trigger = models.ForeignKey(TriggerConfig, on_delete=models.CASCADE, related_name="events")
    key = models.CharField(max_length=200)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    task = models.ForeignKey(
        "tasks.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["trigger", "key"], name="uniq_trigger_event_key")
        ]

    def __str__(self) -> str:
        return f"{self.trigger_id}:{self.key} {self.outcome}"

from django.db import models


class CycleKind(models.TextChoices):
    LEARNING = "learning"
    REFLECTION = "reflection"


class CycleRun(models.Model):
    """One firing of a subagent's learning or reflection trigger: skipped by a readiness gate
    (with the reason, and no task), or started (its task, the topics code picked for it)."""

    class Outcome(models.TextChoices):
        SKIPPED = "skipped"
        STARTED = "started"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="cycle_runs")
    subagent = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=CycleKind.choices)
    trigger = models.ForeignKey(
        "triggers.TriggerConfig", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    reason = models.CharField(max_length=500, blank=True, default="")
    topics = models.JSONField(default=list, blank=True)
    task = models.ForeignKey(
        "tasks.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "subagent", "kind", "-created_at"], name="cyclerun_idx")
        ]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.subagent} {self.kind} #{self.pk} {self.outcome}"


class Confidence(models.TextChoices):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


CONFIDENCE_ORDER = [Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH]


class Learning(models.Model):
    """An insight a learning cycle recorded on a topic, with its confidence; the text lives in
    a memory (`memory`). Corroborated by a later cycle: confidence goes up. Contradicted: this
    row is superseded and points at the learning that replaced it."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        SUPERSEDED = "superseded"
        REVERTED = "reverted"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="learnings")
    subagent = models.CharField(max_length=100)
    topic = models.CharField(max_length=200)
    insight = models.TextField()
    confidence = models.CharField(max_length=6, choices=Confidence.choices)
    sources = models.JSONField(default=list, blank=True)
    corroborations = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    memory = models.ForeignKey(
        "memory.Memory", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    cycle_run = models.ForeignKey(
        CycleRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="learnings"
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.subagent}: {self.topic} ({self.confidence}, {self.status})"


class CycleChange(models.Model):
    """Everything a cycle changed, with the before and after and the evidence: a memory a
    learning wrote, or a skill or subagent file a reflection edited. An identity change waits
    as `proposed` until the team's parent confirms it. Revert restores `before`."""

    class Status(models.TextChoices):
        PROPOSED = "proposed"
        APPLIED = "applied"
        REJECTED = "rejected"
        REVERTED = "reverted"

    class Target(models.TextChoices):
        MEMORY = "memory"
        FILE = "file"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="cycle_changes")
    subagent = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=CycleKind.choices)
    cycle_run = models.ForeignKey(
        CycleRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    target_type = models.CharField(max_length=6, choices=Target.choices)
    # A memory key, or a path relative to the team's workspace.
    target = models.CharField(max_length=300)
    # None: the target did not exist before (a revert removes it).
    before = models.TextField(null=True, blank=True)
    after = models.TextField()
    reason = models.TextField(blank=True, default="")
    evidence = models.JSONField(default=dict, blank=True)
    identity = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=Status.choices)
    created_at = models.DateTimeField(db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=200, blank=True, default="")
    reverted_at = models.DateTimeField(null=True, blank=True)
    reverted_by = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "target", "-created_at"], name="cyclechange_target_idx")
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} {self.target} ({self.status})"

from django.db import models


class Task(models.Model):
    """One unit of work for one team: the durable priority queue. django-q2 only executes
    `run_task(id)`; ordering, leases and retries live here."""

    class Type(models.TextChoices):
        DELEGATE = "delegate"
        TRIGGER = "trigger"
        ESCALATION = "escalation"
        BOOTSTRAP = "bootstrap"
        # A synchronous query_team call: created running, never queued.
        QUERY = "query"

    class Priority(models.IntegerChoices):
        # Lower sorts first: the claim order is (priority, created_at, id).
        CRITICAL = 0, "critical"
        HIGH = 1, "high"
        NORMAL = 2, "normal"
        LOW = 3, "low"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        # Paused until a person answers (`ask_user`) or an operator decides on a call: no
        # worker, no lease, no slot of the team's cap (see `UserQuestion`).
        WAITING_FOR_USER = "waiting_for_user"
        WAITING_FOR_APPROVAL = "waiting_for_approval"

    # No index of its own: `task_team_status_idx` starts with the team, and every index is one
    # more write at each of a task's three status changes.
    team = models.ForeignKey(
        "teams.Team", on_delete=models.CASCADE, related_name="tasks", db_index=False
    )
    type = models.CharField(max_length=16, choices=Type.choices, default=Type.DELEGATE)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.PENDING)
    text = models.TextField()
    result = models.TextField(blank=True, default="")
    options = models.JSONField(default=dict, blank=True)
    source_channel = models.CharField(max_length=200, blank=True, default="")
    topic = models.ForeignKey(
        "chat.Topic", null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    correlation_id = models.CharField(max_length=200, blank=True, default="")
    created_by = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    # A task put back because its model provider stayed down waits until `run_after`; how
    # often that happened and why are kept for the operator.
    run_after = models.DateTimeField(null=True, blank=True)
    defer_count = models.PositiveSmallIntegerField(default=0)
    defer_reason = models.TextField(blank=True, default="")
    # The stop reason of the session that ended the task (completed, cancelled, timeout, ...).
    stop_reason = models.CharField(max_length=20, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The claim path reads only pending work, so finished history never slows it.
            models.Index(
                fields=["priority", "created_at", "id"],
                name="task_pending_claim_idx",
                condition=models.Q(status="pending"),
            ),
            # A team's best pending tasks, read in order (the claim's pick): without it the
            # claim read every pending task of the team and sorted them, so claims slowed
            # down as a team's queue grew.
            models.Index(
                fields=["team", "priority", "created_at", "id"],
                name="task_team_pending_idx",
                condition=models.Q(status="pending"),
            ),
            models.Index(fields=["team", "status"], name="task_team_status_idx"),
            # Pending tasks handed out to a django-q2 worker: a few at a time, counted at every
            # dispatch tick, which otherwise read every pending task.
            models.Index(
                fields=["team", "dispatched_at"],
                name="task_pending_handed_idx",
                condition=models.Q(status="pending", dispatched_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        # What an operator reads in the admin's titles and links: never a bare team id.
        return f"Task #{self.pk} · {self.team.name} · {self.type} · {self.status}"

    @property
    def priority_name(self) -> str:
        return self.Priority(self.priority).label


class OrgOpLock(models.Model):
    """The per-team org-op mutex, shared by every process: while a row exists (and has not
    expired) no new daily-op task of the team is admitted; in-flight ones drain first."""

    team = models.OneToOneField("teams.Team", on_delete=models.CASCADE, related_name="org_op_lock")
    holder = models.CharField(max_length=200)
    operation = models.CharField(max_length=100, blank=True, default="")
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.team.name}: {self.operation} by {self.holder}"


class TaskTodo(models.Model):
    """One item of a task's working checklist, kept by the session that runs the task
    (`set_todos`, `add_todo`, `complete_todo`) so the operator sees where the work stands."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="todos")
    position = models.PositiveSmallIntegerField()
    text = models.CharField(max_length=500)
    done = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["task_id", "position", "id"]
        indexes = [models.Index(fields=["task", "position"], name="task_todo_order_idx")]

    def __str__(self) -> str:
        return f"#{self.task_id}.{self.position} {'[x]' if self.done else '[ ]'} {self.text[:40]}"


class UserQuestion(models.Model):
    """What a paused task waits for, and the audit of how it ended: a question to the person
    the work came from (`ask_user`), or a call an operator must approve (`require_approval`).
    The paused session's conversation is kept here (scrubbed) so any worker can resume it."""

    class Kind(models.TextChoices):
        QUESTION = "question"
        APPROVAL = "approval"

    class State(models.TextChoices):
        PENDING = "pending"
        ANSWERED = "answered"
        APPROVED = "approved"
        DENIED = "denied"
        # The timeout gave the team's default answer; or, without a default, failed the task.
        DEFAULTED = "defaulted"
        EXPIRED = "expired"
        # The task ended otherwise (cancelled) while it waited.
        CLOSED = "closed"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="questions")
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="questions")
    session = models.ForeignKey(
        "engine.Session", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    text = models.TextField(blank=True, default="")
    options = models.JSONField(default=list, blank=True)
    tool = models.CharField(max_length=100, blank=True, default="")
    arguments = models.JSONField(default=dict, blank=True)
    # Where the question was sent (the chat the work came from), if anywhere.
    channel_id = models.CharField(max_length=200, blank=True, default="")
    topic = models.ForeignKey(
        "chat.Topic", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The conversation at the pause, the waiting call and the calls after it.
    resume_state = models.JSONField(default=dict, blank=True)
    answer = models.TextField(blank=True, default="")
    reason = models.TextField(blank=True, default="")
    decided_by = models.CharField(max_length=150, blank=True, default="")
    decided_via = models.CharField(max_length=20, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    # The resumed run took it (so it is given once).
    resumed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    default_answer = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "expires_at"], name="question_state_expiry_idx"),
            models.Index(fields=["channel_id", "state"], name="question_channel_idx"),
        ]

    def __str__(self) -> str:
        what = self.text[:60] if self.kind == self.Kind.QUESTION else f"approve {self.tool}"
        return f"#{self.pk} · task #{self.task_id} · {self.kind} · {self.state}: {what}"

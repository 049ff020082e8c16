from django.db import models

# The one row of EngineLease that says which engine loop leads.
LEADER = "engine-leader"


class Session(models.Model):
    """One disposable run of one team on one task, chat turn or query."""

    class Kind(models.TextChoices):
        TASK = "task"
        CHAT = "chat"
        QUERY = "query"
        # A child session run for one of a team's subagents (by `run_subagent`, or directly
        # by a trigger that names the subagent).
        SUBAGENT = "subagent"

    class StopReason(models.TextChoices):
        COMPLETED = "completed"
        MAX_TURNS = "max_turns"
        BUDGET_EXCEEDED = "budget_exceeded"
        CANCELLED = "cancelled"
        TIMEOUT = "timeout"
        ERROR = "error"
        # Closed by the queue, not by the loop: its worker was killed (the lease ran out), or
        # stopped on purpose and handed the task back (serve's shutdown, a lost database).
        WORKER_DIED = "worker_died"
        INTERRUPTED = "interrupted"
        # Paused to wait for a person (ask_user, an approval); a new session resumes it.
        WAITING = "waiting"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="sessions")
    task = models.ForeignKey(
        "tasks.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions"
    )
    topic = models.ForeignKey(
        "chat.Topic", null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions"
    )
    # Lineage: the session (and its task) whose tool call started this one (a delegated task,
    # a query of a child team), so a task tree can be walked, replayed and traced as one.
    parent_session = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="child_sessions"
    )
    parent_task = models.ForeignKey(
        "tasks.Task",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="child_sessions",
    )
    trace_id = models.CharField(max_length=32, blank=True, default="")
    # How the caller shaped the agent (only_tools, topic_name, max_turns): what a replay needs
    # to build the same spec again.
    spec_options = models.JSONField(default=dict, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TASK)
    # The subagent this session ran as (`subagents/{agent_name}.md`); empty for the team itself.
    # Not indexed: only the admin's substring search reads it, which no b-tree can answer.
    agent_name = models.CharField(max_length=100, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    provider_profile = models.CharField(max_length=100, blank=True, default="")
    stop_reason = models.CharField(max_length=20, choices=StopReason.choices, blank=True)
    error = models.TextField(blank=True, default="")
    final_text = models.TextField(blank=True, default="")
    turns = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    started_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        # What an operator reads in the admin's titles and links: never a bare team id.
        return (
            f"Session #{self.pk} · {self.team.name} · {self.kind} · {self.stop_reason or 'running'}"
        )


class LlmExchange(models.Model):
    """One completion request and its reply, scrubbed of secrets, enough to replay the session.

    `turn` numbers every exchange of the session in order. A `step` is a turn of the tool loop;
    a `compaction` is the summary call that shortened the history; a `failed` exchange is a
    call that no retry or fallback could answer. The request of a step is the previous step's
    request cut to `request_start` messages plus `request_messages` (null: appended to all of
    it); a compaction stores its whole request."""

    class Kind(models.TextChoices):
        STEP = "step"
        COMPACTION = "compaction"
        FAILED = "failed"

    # No index of its own: `uniq_exchange_turn` starts with the session and serves its lookups.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="exchanges", db_index=False
    )
    turn = models.PositiveIntegerField()
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.STEP)
    request_digest = models.CharField(max_length=64)
    request_start = models.PositiveIntegerField(null=True, blank=True)
    request_messages = models.JSONField(default=list)
    # The tools offered with the request: their names, and a digest of their schemas.
    tools = models.JSONField(default=list, blank=True)
    tools_digest = models.CharField(max_length=64, blank=True, default="")
    # The profile that answered, and every attempt made (retries, fallbacks) with its error.
    provider_profile = models.CharField(max_length=100, blank=True, default="")
    attempts = models.JSONField(default=list, blank=True)
    response = models.JSONField(default=dict)
    finish_reason = models.CharField(max_length=40, blank=True, default="")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session_id", "turn"]
        constraints = [
            models.UniqueConstraint(fields=["session", "turn"], name="uniq_exchange_turn")
        ]

    def __str__(self) -> str:
        return f"exchange {self.session_id}/{self.turn}"


class ToolCall(models.Model):
    """The audit row written for every tool call, with secret values already replaced."""

    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    team = models.ForeignKey(
        "teams.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    team_name = models.CharField(max_length=64)
    tool = models.CharField(max_length=100)
    arguments = models.JSONField(default=dict)
    success = models.BooleanField(default=False)
    result = models.JSONField(default=dict)
    error = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # A plain b-tree for the admin's filter by tool: `db_index` would add, on PostgreSQL, a
        # second (pattern) index that no query uses, written at every tool call.
        indexes = [models.Index(fields=["tool"], name="toolcall_tool_idx")]

    def __str__(self) -> str:
        return f"{self.team_name}.{self.tool} {'ok' if self.success else 'failed'}"


class EngineLease(models.Model):
    """Leadership of the engine loop: several loops may run, one leads. The leader renews its
    lease every tick; when it stops renewing, another loop takes over after the lease expires."""

    name = models.CharField(max_length=50, primary_key=True)
    holder = models.CharField(max_length=200)
    expires_at = models.DateTimeField()
    acquired_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.holder}"


class WorkerBeat(models.Model):
    """A pull worker process (`manage.py openhive worker`, as `serve` runs it) saying it is
    alive: written when it starts and every few seconds, deleted when it stops. The dashboard
    counts the fresh ones; a row left by a killed process simply goes stale."""

    name = models.CharField(max_length=200, primary_key=True)  # host:pid
    threads = models.PositiveIntegerField()
    busy = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.name

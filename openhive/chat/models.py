from django.db import models
from django.utils import timezone


class Topic(models.Model):
    """A conversation thread inside one chat channel."""

    class State(models.TextChoices):
        ACTIVE = "active"
        IDLE = "idle"
        CLOSED = "closed"

    channel_id = models.CharField(max_length=200, db_index=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by routing (not auto_now_add) so idling can be tested with a given clock.
    last_activity_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-last_activity_at", "-id"]

    def __str__(self) -> str:
        return f"{self.channel_id}/{self.name}"


class Message(models.Model):
    """A chat message, inbound from a person or outbound from the main agent. An inbound message
    carries the trust gate's decision; it has no topic while it waits for routing, and never
    gets one when the gate refused it (so it can never reach a prompt).

    Everything else that reached the person through the outbox (a team's result, a notification,
    an escalation) is stored here too, with the team and the task, so a topic's history is the
    whole conversation. Such a delivery without a topic belongs to the channel's notifications.
    Only user and assistant messages go into the model's history (`CONVERSATION_ROLES`)."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        RESULT = "result"
        NOTIFICATION = "notification"
        ESCALATION = "escalation"

    topic = models.ForeignKey(
        Topic, null=True, blank=True, on_delete=models.CASCADE, related_name="messages"
    )
    channel_id = models.CharField(max_length=200, db_index=True)
    sender_id = models.CharField(max_length=200, blank=True, default="")
    sender_asserted = models.BooleanField(default=False)
    role = models.CharField(max_length=20, choices=Role.choices)
    content = models.TextField()
    # Deliveries only: which team sent it, for which task (by id: chat sits below the queue),
    # and the task's status when it was delivered.
    team_name = models.CharField(max_length=64, blank=True, default="")
    task_id = models.BigIntegerField(null=True, blank=True)
    task_status = models.CharField(max_length=20, blank=True, default="")
    # An answer points at the message it answers: turns of one topic may interleave in storage
    # (later messages arrive while an earlier turn runs), history is rebuilt question, answer.
    in_reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replies"
    )
    trust_decision = models.CharField(max_length=10, blank=True, default="")
    trust_reason = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"


CONVERSATION_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)


class OutboxMessage(models.Model):
    """Something produced away from the socket (a worker's result, a bootstrap notice) that must
    reach a chat channel. Written in the same transaction as the result; delivered when a socket
    of that channel is (or next becomes) connected."""

    class Kind(models.TextChoices):
        NOTIFICATION = "notification"
        RESPONSE = "response"
        RESULT = "result"
        ESCALATION = "escalation"
        # A paused task asks the person (`ask_user`) or an operator (an approval).
        QUESTION = "question"
        APPROVAL = "approval"

    channel_id = models.CharField(max_length=200)
    topic = models.ForeignKey(
        Topic, null=True, blank=True, on_delete=models.SET_NULL, related_name="outbox"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.NOTIFICATION)
    team_name = models.CharField(max_length=64, blank=True, default="")
    content = models.TextField()
    # The task whose result this is, by id: chat sits below the queue and knows no Task model.
    task_id = models.BigIntegerField(null=True, blank=True)
    # The same delivery as a stored chat message (written together): what history shows.
    message = models.OneToOneField(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="outbox_item"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    # Structured detail for clients (a question's id, options, the tool awaiting approval).
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(
                fields=["channel_id", "id"],
                name="outbox_undelivered_idx",
                condition=models.Q(delivered_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel_id}: {self.content[:40]}"

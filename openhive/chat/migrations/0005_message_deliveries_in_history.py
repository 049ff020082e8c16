"""Outbox deliveries (results, notifications, escalations) become chat messages too, so a
topic's history holds them. Rows delivered before this migration are copied once, in order."""

import django.db.models.deletion
from django.db import migrations, models

ROLES = {"response": "assistant", "result": "result", "escalation": "escalation"}


def copy_deliveries(apps, schema_editor):
    Message = apps.get_model("chat", "Message")
    OutboxMessage = apps.get_model("chat", "OutboxMessage")
    for item in OutboxMessage.objects.filter(message__isnull=True).order_by("id").iterator():
        tag = f"[{item.team_name}] "
        content = item.content
        if item.team_name and content.startswith(tag):
            content = content[len(tag) :]
        message = Message.objects.create(
            topic_id=item.topic_id,
            channel_id=item.channel_id,
            role=ROLES.get(item.kind, "notification"),
            content=content,
            team_name=item.team_name,
            task_id=item.task_id,
        )
        # Keep the delivery's own time, not the migration's.
        Message.objects.filter(pk=message.pk).update(created_at=item.created_at)
        OutboxMessage.objects.filter(pk=item.pk).update(message=message)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0004_outbox_task_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="task_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="task_status",
            field=models.CharField(blank=True, default="", max_length=20),
        ),
        migrations.AddField(
            model_name="message",
            name="team_name",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="outboxmessage",
            name="message",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="outbox_item",
                to="chat.message",
            ),
        ),
        migrations.AlterField(
            model_name="message",
            name="role",
            field=models.CharField(
                choices=[
                    ("user", "User"),
                    ("assistant", "Assistant"),
                    ("result", "Result"),
                    ("notification", "Notification"),
                    ("escalation", "Escalation"),
                ],
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="outboxmessage",
            name="kind",
            field=models.CharField(
                choices=[
                    ("notification", "Notification"),
                    ("response", "Response"),
                    ("result", "Result"),
                    ("escalation", "Escalation"),
                ],
                default="notification",
                max_length=20,
            ),
        ),
        migrations.RunPython(copy_deliveries, migrations.RunPython.noop),
    ]
